{{/* The chart's name, as in app.kubernetes.io/name. */}}
{{- define "orca.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The objects' name prefix: the release name when it contains the chart's name (release `orca`
gives deploy/base's names), else RELEASE-orca.
*/}}
{{- define "orca.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "orca.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* What selects the release's pods. */}}
{{- define "orca.selectorLabels" -}}
app.kubernetes.io/name: {{ include "orca.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Helm's standard labels, on every object. */}}
{{- define "orca.labels" -}}
helm.sh/chart: {{ include "orca.chart" . }}
{{ include "orca.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "orca.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "orca.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name names the existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "orca.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "orca.pluginsConfigMap" -}}
{{- default (printf "%s-plugins" (include "orca.fullname" .)) .Values.plugins.existingConfigMap }}
{{- end }}

{{/*
orca's config.yaml: `config`, with the fields `settings` and `plugins` name set from them.
*/}}
{{- define "orca.config" -}}
{{- $config := deepCopy (.Values.config | default dict) }}
{{- $node := get $config "node" | default dict }}
{{- $_ := set $node "name" .Values.settings.nodeName }}
{{- $_ := set $node "clusterName" .Values.settings.clusterName }}
{{- $_ := set $config "node" $node }}
{{- with .Values.settings.nodes }}
{{- $_ := set $config "nodes" . }}
{{- end }}
{{- $replicas := get $config "replicas" | default dict }}
{{- $_ := set $replicas "shareNodes" .Values.settings.shareNodes }}
{{- $_ := set $config "replicas" $replicas }}
{{- $policy := get $config "policy" | default dict }}
{{- $_ := set $policy "pluginsDir" "/etc/orca/plugins" }}
{{- with .Values.plugins.oci }}
{{- $_ := set $policy "plugins" . }}
{{- end }}
{{- if .Values.plugins.registryCredentialsSecret }}
{{- $registry := get $policy "registry" | default dict }}
{{- $_ := set $registry "dockerConfig" "/etc/orca/registry/.dockerconfigjson" }}
{{- $_ := set $policy "registry" $registry }}
{{- end }}
{{- $_ := set $config "policy" $policy }}
{{- with .Values.settings.interruptionQueue }}
{{- $provider := get $config "provider" | default dict }}
{{- $aws := get $provider "aws" | default dict }}
{{- $queue := get $aws "interruptionQueue" | default dict }}
{{- $_ := set $queue "url" . }}
{{- $_ := set $aws "interruptionQueue" $queue }}
{{- $_ := set $provider "aws" $aws }}
{{- $_ := set $config "provider" $provider }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/* A port of orca's config: dig "metrics" "port" 10255, as the config sets it or its default. */}}
{{- define "orca.metricsPort" -}}
{{- dig "metrics" "port" 10255 (.Values.config | default dict) | int }}
{{- end }}
{{- define "orca.kubeletPort" -}}
{{- dig "node" "daemonPort" 10250 (.Values.config | default dict) | int }}
{{- end }}
