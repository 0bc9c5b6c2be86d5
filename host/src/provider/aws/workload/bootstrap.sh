#!/bin/bash
# orca bootstrap: runs one Kubernetes pod's containers with Docker on this instance, reports how
# they ended, and powers the instance off (orca launches it to terminate on shutdown).
#
# This file is a template: orca drops comment lines and indentation to save user-data bytes, and
# puts the pod's data where the WORKLOAD marker is. It must not use heredocs or strings that span
# lines, since indentation is stripped. ORCA_ROOT, ORCA_CONSOLE, ORCA_IMDS, ORCA_BACKOFF_SECONDS,
# ORCA_DRAIN_SECONDS, ORCA_CGROUP, ORCA_DEV, ORCA_SYS, ORCA_ATTACH_SECONDS and ORCA_DOCKER_ROOT
# exist for tests; cloud-init sets none of them.
#
# Serial-console lines (read back with GetConsoleOutput):
#   orca[CONTAINER] TIMESTAMP LINE   a line of a container's output, with docker's timestamp
#   orca-exit[CONTAINER]=N           a run of a container ended with exit code N
#   orca-exit-code=N                 the pod ended with exit code N
# Exit code 125 means Docker could not run a container (as `docker run` reports): the image did
# not pull, Docker is missing, or a volume could not be prepared; the container's log says why.
set -u -o pipefail

orca_root=${ORCA_ROOT:-/var/lib/orca}
orca_state=$orca_root/state
orca_imds_url=${ORCA_IMDS:-http://169.254.169.254}
orca_backoff=${ORCA_BACKOFF_SECONDS:-10}
orca_console=${ORCA_CONSOLE:-}
orca_dev=${ORCA_DEV:-/dev}
orca_sys=${ORCA_SYS:-/sys}
if [ -z "$orca_console" ]; then
  for orca_device in /dev/ttyS0 /dev/console; do
    if [ -w "$orca_device" ]; then
      orca_console=$orca_device
      break
    fi
  done
fi
orca_console=${orca_console:-/dev/null}
# Every container gets the host's network: the pod IP is the instance's IP, and IMDS (hop
# limit 1) stays reachable from containers, as a pod's containers share one network namespace.
orca_docker=(--network host)
# Where Docker keeps a container's output: rotated json-file logs, unless the pod's data ships
# it to CloudWatch Logs: then orca_log is the awslogs options, and orca_streams each container's
# stream (in the order of orca_names), to which orca_attempt adds the instance's region.
# Either way `docker logs` reads it back for the console (with awslogs, from Docker's cache).
orca_log=(--log-driver json-file --log-opt max-size=100m --log-opt max-file=3)
orca_streams=()
# Resource usage is sampled and published to CloudWatch only when the pod's data sets
# orca_metrics_interval (seconds), with orca_metrics_namespace and orca_metrics_pod_uid;
# orca_sampler is then the sampler's process.
orca_metrics_interval=0
orca_sampler=
# What prepares the instance's disks before Docker starts: nothing, unless the user data has
# the instance store's helpers (provider.aws.instanceStorePolicy RAID0), which set it to theirs.
# orca_disk is the filesystem that holds Docker's data and the pod's volumes (the instance
# store once it does), whose size is the pod's ephemeral-storage capacity.
orca_disk_setup=:
orca_disk=/

orca_now() {
  date -u +%Y-%m-%dT%H:%M:%S.%NZ
}

# orca_say CONTAINER TEXT: a line from orca itself in the container's log (and cloud-init's).
orca_say() {
  printf 'orca[%s] %s orca: %s\n' "$1" "$(orca_now)" "$2" >>"$orca_console"
  printf 'orca: %s: %s\n' "$1" "$2"
}

# orca_say_file CONTAINER FILE: each line of FILE (an error output) in the container's log.
orca_say_file() {
  local line
  while IFS= read -r line || [ -n "$line" ]; do
    orca_say "$1" "$line"
  done <"$2"
}

# orca_mark TEXT: a marker line for orca on the console.
orca_mark() {
  printf '%s\n' "$1" >>"$orca_console"
  printf 'orca: %s\n' "$1"
}

# orca_imds PATH: a metadata value over IMDSv2 (a session token first). A missing path (HTTP
# 404) fails at once; other failures are retried.
orca_imds() {
  local token attempt status
  for attempt in 1 2 3 4 5; do
    if token=$(curl -sf -m 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' "$orca_imds_url/latest/api/token"); then
      curl -sf -m 5 -H "X-aws-ec2-metadata-token: $token" "$orca_imds_url/latest/meta-data/$1" && return 0
      status=$?
      [ "$status" -eq 22 ] && return 1
    fi
    sleep "$attempt"
  done
  return 1
}

# orca_facts: what only the instance knows, for environment values that refer to it.
orca_facts() {
  local kb disk
  orca_ip=$(orca_imds local-ipv4 || orca_imds ipv6) || orca_ip=
  orca_cpu_millis=$(($(nproc) * 1000))
  kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
  orca_memory_bytes=$((${kb:-0} * 1024))
  disk=$(df -B1 --output=size "$orca_disk" | tail -n 1)
  orca_disk_bytes=$((${disk:-0}))
  # For awslogs and the metrics; without it Docker and the AWS CLI ask IMDS themselves.
  orca_region=
  if [ ${#orca_streams[@]} -gt 0 ] || [ "$orca_metrics_interval" -gt 0 ]; then
    orca_region=$(orca_imds placement/region) || orca_region=
  fi
}

# orca_cpus MILLIS: a --cpus value, capped at the instance's CPUs (docker refuses more).
orca_cpus() {
  local millis=$(($1 < orca_cpu_millis ? $1 : orca_cpu_millis))
  printf '%d.%03d' $((millis / 1000)) $((millis % 1000))
}

orca_docker_ready() {
  local attempt
  for attempt in $(seq 1 60); do
    docker info >/dev/null 2>&1 && return 0
    [ "$attempt" -eq 1 ] && systemctl start docker >/dev/null 2>&1
    sleep 2
  done
  return 1
}

# Volume helpers, called from the pod's orca_volumes.
orca_dir() {
  mkdir -p "$orca_root/volumes/$1"
}
orca_tmpfs() {
  orca_dir "$1" && mount -t tmpfs -o "size=$2" tmpfs "$orca_root/volumes/$1"
}
# orca_file VOLUME PATH MODE BASE64
orca_file() {
  local file=$orca_root/volumes/$1/$2
  mkdir -p "${file%/*}" && printf '%s' "$4" | base64 -d >"$file" && chmod "$3" "$file"
}

# orca_pull I: container I's image, as its imagePullPolicy says, with five tries.
orca_pull() {
  local name=${orca_names[$1]} image=${orca_images[$1]} attempt
  case ${orca_pulls[$1]} in
    Never) return 0 ;;
    IfNotPresent) docker image inspect "$image" >/dev/null 2>&1 && return 0 ;;
  esac
  for attempt in 1 2 3 4 5; do
    docker pull -q "$image" >/dev/null 2>"$orca_state/$name.pull" && return 0
    # 2, 8, 18 and 32 s between tries (with the default backoff of 10).
    [ "$attempt" -lt 5 ] && sleep $((attempt * attempt * orca_backoff / 5))
  done
  orca_say "$name" "pulling image $image failed:"
  orca_say_file "$name" "$orca_state/$name.pull"
  return 1
}

# orca_attempt I: one run of container I, its output streamed to the console; returns its exit
# code, or 125 when docker could not run it.
orca_attempt() {
  local name=${orca_names[$1]} code follower orca_a=() log=("${orca_log[@]}")
  "orca_args_$1"
  if [ -n "${orca_streams[$1]:-}" ]; then
    log+=(--log-opt "awslogs-stream=${orca_streams[$1]}")
    [ -n "$orca_region" ] && log+=(--log-opt "awslogs-region=$orca_region")
  fi
  docker rm -f "orca-$name" >/dev/null 2>&1
  if ! docker create --name "orca-$name" "${orca_docker[@]}" "${log[@]}" "${orca_a[@]}" >/dev/null 2>"$orca_state/$name.err" ||
    ! docker start "orca-$name" >/dev/null 2>>"$orca_state/$name.err"; then
    orca_say "$name" "docker could not run the container:"
    orca_say_file "$name" "$orca_state/$name.err"
    return 125
  fi
  touch "$orca_state/$name.started"
  docker logs -f --timestamps "orca-$name" 2>&1 | sed -u "s/^/orca[$name] /" >>"$orca_console" &
  follower=$!
  code=$(docker wait "orca-$name")
  orca_drain "$follower" "$name"
  [[ $code =~ ^[0-9]+$ ]] || code=125
  return "$code"
}

# orca_drain PID CONTAINER: lets a log follower copy what is left to the console, for at most
# a minute: a serial console takes some 10 KB/s, and EC2 keeps only its last 64 KiB anyway, so
# a chatty container's backlog must not keep the instance (and its bill) running.
orca_drain() {
  local left=$((${ORCA_DRAIN_SECONDS:-60} * 5))
  while kill -0 "$1" 2>/dev/null && [ "$left" -gt 0 ]; do
    sleep 0.2
    left=$((left - 1))
  done
  if kill -0 "$1" 2>/dev/null; then
    kill "$1" 2>/dev/null
    orca_say "$2" "output after this point was not copied to the console"
  fi
  wait "$1" 2>/dev/null
}

# orca_sleep SECONDS: sleeps, but wakes within a second once the pod is stopping.
orca_sleep() {
  local left=$1
  while [ "$left" -gt 0 ] && [ ! -e "$orca_state/stopping" ]; do
    sleep 1
    left=$((left - 1))
  done
}

# orca_run I POLICY: container I until it is done under POLICY (Never, OnFailure or Always),
# restarted with the kubelet's backoff (10 s, doubling, at most 5 min); returns the last exit code.
orca_run() {
  local name=${orca_names[$1]} policy=$2 code delay=$orca_backoff
  if ! orca_pull "$1"; then
    orca_mark "orca-exit[$name]=125"
    return 125
  fi
  while :; do
    orca_attempt "$1"
    code=$?
    orca_mark "orca-exit[$name]=$code"
    case $policy in
      Always) ;;
      OnFailure) [ "$code" -eq 0 ] && return 0 ;;
      *) return "$code" ;;
    esac
    [ -e "$orca_state/stopping" ] && return "$code"
    orca_say "$name" "exited with code $code; restarting in ${delay}s (restartPolicy $policy)"
    orca_sleep "$delay"
    [ -e "$orca_state/stopping" ] && return "$code"
    delay=$((delay * 2 > 300 ? 300 : delay * 2))
  done
}

# orca_stop: stops the sidecars (last started first) and waits for every run to finish.
orca_stop() {
  local k
  touch "$orca_state/stopping"
  [ -n "$orca_sampler" ] && kill "$orca_sampler" 2>/dev/null
  for ((k = ${#orca_sidecars[@]} - 1; k >= 0; k--)); do
    docker stop -t 10 "orca-${orca_names[${orca_sidecars[$k]}]}" >/dev/null 2>&1
  done
  wait
}

# orca_finish CODE: reports the pod's exit code (console, then instance tags) and powers off.
orca_finish() {
  local code=$1 finished id region tags attempt
  trap - EXIT
  finished=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  orca_stop
  orca_mark "orca-exit-code=$code"
  if id=$(orca_imds instance-id) && region=$(orca_imds placement/region); then
    tags=$(printf '[{"Key":"%s","Value":"%s"},{"Key":"%s","Value":"%s"}]' "$orca_tag_exit_code" "$code" "$orca_tag_finished_at" "$finished")
    for attempt in 1 2 3 4 5; do
      aws ec2 create-tags --region "$region" --resources "$id" --tags "$tags" >/dev/null 2>"$orca_state/tags.err" && break
      printf 'orca: tagging the instance failed (try %s): %s\n' "$attempt" "$(tail -n 1 "$orca_state/tags.err")"
      [ "$attempt" -lt 5 ] && sleep $((attempt * 3))
    done
  else
    echo 'orca: no instance id or region from IMDS; the exit code is on the console only'
  fi
  sync
  shutdown -h now
  exit "$code"
}

# @SCRATCH@
# The instance store's helpers, only in the user data with provider.aws.instanceStorePolicy
# RAID0 (the default).
# orca_try STEP COMMAND...: sets orca_scratch's step to STEP and runs COMMAND without input or
# output, its errors kept for orca_scratch's report should it fail.
orca_try() {
  step=$1
  shift
  "$@" </dev/null >/dev/null 2>"$orca_state/scratch.err"
}
# orca_scratch: the instance's local NVMe instance-store disks (most types have none, and then
# nothing happens; EBS disks have another model) as the pod's scratch, as Karpenter's
# instanceStorePolicy RAID0 does: the disk, or all of them striped into RAID0 with mdadm, gets
# an xfs filesystem mounted at $orca_root/scratch. Docker is stopped, what its data root holds
# is copied there (images the AMI pre-pulled stay), and its data root and the pod's volumes'
# directory are bind-mounted from there before Docker starts again: image pulls, containers'
# writable layers and emptyDir volumes use the instance store, while tmpfs, EBS and EFS volumes
# still mount on their own directories. A step that fails is reported in the first container's
# log with the tool's words, what was done is undone, and the pod runs on the root disk.
orca_scratch() {
  local dir=$orca_root/scratch docker=${ORCA_DOCKER_ROOT:-/var/lib/docker} disks=() file model device how=" (one disk)" step=
  for file in "$orca_sys"/block/nvme*/device/model; do
    model=
    [ -e "$file" ] && read -r model <"$file"
    file=${file%/device/model}
    [ "$model" = "Amazon EC2 NVMe Instance Storage" ] && disks+=("$orca_dev/${file##*/}")
  done
  [ ${#disks[@]} -eq 0 ] && return 0
  device=${disks[0]}
  mkdir -p "$dir"
  # One disk has no array to create; mdadm asks nothing with --run (and no input).
  if [ ${#disks[@]} -gt 1 ]; then
    device=$orca_dev/md/orca-scratch
    how=" in RAID0 as $device"
    orca_try "creating the RAID0 array" mdadm --create "$device" --level=0 --raid-devices=${#disks[@]} --run --force "${disks[@]}"
  fi && orca_try "creating an xfs filesystem on $device" mkfs -t xfs "$device" &&
    orca_try "mounting $device at $dir" mount -t xfs "$device" "$dir" && {
    mkdir -p "$dir/docker" "$dir/volumes" "$docker"
    if orca_try "stopping Docker" systemctl stop docker.socket docker &&
      orca_try "copying $docker" cp -a "$docker/." "$dir/docker" &&
      orca_try "mounting $dir/docker at $docker" mount --bind "$dir/docker" "$docker"; then
      if orca_try "mounting $dir/volumes at $orca_root/volumes" mount --bind "$dir/volumes" "$orca_root/volumes"; then
        step=
      else
        umount "$docker"
      fi
    fi
    [ -n "$step" ] && umount "$dir"
    systemctl start docker >/dev/null 2>&1
  }
  if [ -n "$step" ]; then
    orca_say "$orca_default" "$step failed, so the instance store (${disks[*]}) is not used and Docker and the pod's volumes stay on the root disk:"
    orca_say_file "$orca_default" "$orca_state/scratch.err"
    return 0
  fi
  orca_disk=$dir
  echo "orca: instance store ${disks[*]}$how mounted at $dir, for Docker's data root and the pod's emptyDir volumes"
}
orca_disk_setup=orca_scratch

# @CLAIMS@
# The claims' helpers, only in the user data of pods with EBS or EFS claims.
# orca_ebs_device VOLUME_ID LETTER: the device of the EBS volume orca attached at
# /dev/sdLETTER, once the kernel has it: on Nitro an NVMe disk whose serial is the volume id
# without its dash; on Xen /dev/xvdLETTER (or /dev/sdLETTER).
orca_ebs_device() {
  local serial=${1/-/} file
  for file in "$orca_sys"/block/nvme*/device/serial; do
    [ -e "$file" ] || continue
    if [ "$(tr -d ' \n' <"$file")" = "$serial" ]; then
      file=${file%/device/serial}
      echo "$orca_dev/${file##*/}"
      return 0
    fi
  done
  for file in "$orca_dev/xvd$2" "$orca_dev/sd$2"; do
    [ -e "$file" ] && echo "$file" && return 0
  done
  return 1
}
# orca_ebs VOLUME VOLUME_ID LETTER FSTYPE rw|ro: waits for the EBS volume to be attached,
# creates a FSTYPE filesystem only on a volume blkid finds blank and only when it is mounted
# rw, and mounts it (with the filesystem it has) as the pod's volume.
orca_ebs() {
  local dir=$orca_root/volumes/$1 limit=${ORCA_ATTACH_SECONDS:-600} waited=0 device probe rc=0 fs pt
  until device=$(orca_ebs_device "$2" "$3"); do
    if [ "$waited" -ge "$limit" ]; then
      echo "volume $1: EBS volume $2 was not attached to this instance within $limit s" >&2
      return 1
    fi
    sleep 1
    waited=$((waited + 1))
  done
  # blkid exits 2 when it finds nothing on the device: only then is the volume blank.
  probe=$(blkid -p -s TYPE -s PTTYPE -o export "$device") || rc=$?
  case $rc in
    0 | 2) ;;
    *)
      echo "volume $1: could not read EBS volume $2 at $device (blkid exit code $rc)" >&2
      return 1
      ;;
  esac
  fs=$(printf '%s\n' "$probe" | sed -n 's/^TYPE=//p')
  pt=$(printf '%s\n' "$probe" | sed -n 's/^PTTYPE=//p')
  if [ -z "$fs" ]; then
    if [ -n "$pt" ]; then
      echo "volume $1: EBS volume $2 holds a $pt partition table and no filesystem; orca mounts a filesystem on the whole volume" >&2
      return 1
    fi
    if [ "$5" = ro ]; then
      echo "volume $1: EBS volume $2 has no filesystem and is mounted read-only, so it is not formatted" >&2
      return 1
    fi
    echo "orca: creating a $4 filesystem on EBS volume $2 ($device)"
    mkfs -t "$4" "$device" >/dev/null || return 1
    fs=$4
  fi
  orca_dir "$1" && mount -t "$fs" -o "$5" "$device" "$dir"
}
# orca_efs VOLUME FILE_SYSTEM_ID PATH ACCESS_POINT rw|ro: the EFS file system's PATH mounted as
# the pod's volume: with TLS through amazon-efs-utils' mount helper where the AMI has it, else
# over NFS 4.1 as EFS documents (an access point needs the helper). The file system's DNS name
# resolves to its mount target in the instance's zone.
orca_efs() {
  local dir=$orca_root/volumes/$1 region
  orca_dir "$1" || return 1
  if command -v mount.efs >/dev/null 2>&1; then
    mount -t efs -o "tls,$5${4:+,accesspoint=$4}" "$2:$3" "$dir"
    return
  fi
  if [ -n "$4" ]; then
    echo "volume $1: EFS access point $4 needs amazon-efs-utils (mount.efs) on the AMI" >&2
    return 1
  fi
  if ! region=$(orca_imds placement/region); then
    echo "volume $1: no region from the instance metadata, so no DNS name for EFS $2" >&2
    return 1
  fi
  mount -t nfs4 -o "nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,$5" "$2.efs.$region.amazonaws.com:$3" "$dir"
}
# orca_bind VOLUME OTHER: the pod's volume OTHER is VOLUME again (the same EBS volume).
orca_bind() {
  orca_dir "$2" && mount --bind "$orca_root/volumes/$1" "$orca_root/volumes/$2"
}

# @SAMPLER@
# orca_sample: until the pod stops, every orca_metrics_interval seconds (on the clock's multiples
# of it), each running container's CPU time and working set from its cgroup (v2: Docker's systemd
# driver's path, else its cgroupfs one), and each GPU's use and the pod's from nvidia-smi (in
# MiB), published to CloudWatch in calls of at most 1000 data. A container whose cgroup files
# are gone (it just ended) is skipped; a failed publish is only reported. Each datum is first a
# line "METRIC UNIT VALUE [DIMENSION VALUE]" of $orca_state/sample. The names are those of
# MetricPublishing; pod UIDs and container names need no escaping in JSON.
# orca keeps this function (up to the pod's data) only for pods that publish their usage.
orca_sample() {
  local n=$orca_metrics_interval cg=${ORCA_CGROUP:-/sys/fs/cgroup} s=$orca_state/sample name id dir file
  while [ ! -e "$orca_state/stopping" ]; do
    rm -f "$s".*
    : >"$s"
    for name in "${orca_names[@]}"; do
      id=$(docker inspect -f '{{if .State.Running}}{{.Id}}{{end}}' "orca-$name" 2>/dev/null) && [ -n "$id" ] || continue
      dir=$cg/system.slice/docker-$id.scope
      [ -d "$dir" ] || dir=$cg/docker/$id
      awk -v c="Container $name" 'FNR==1{k++} $1=="usage_usec"{u=$2} NF==1{w=$1} $1=="inactive_file"{w-=$2} END{if(k>2)printf "CpuUsageSeconds Seconds %.6f %s\nMemoryWorkingSetBytes Bytes %.0f %s\n",u/1e6,c,(w>0?w:0),c}' "$dir/cpu.stat" "$dir/memory.current" "$dir/memory.stat" >>"$s" 2>/dev/null
    done
    nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits 2>/dev/null | awk -F', *' '/^[0-9]+, *[0-9.]+, *[0-9.]+ *$/{printf "GpuUtilization Percent %s Gpu %s\nGpuMemoryUsedBytes Bytes %.0f Gpu %s\n",$2,$1,$3*1048576,$1;u+=$2;m+=$3;k++} END{if(k)printf "GpuUtilization Percent %.2f\nGpuMemoryUsedBytes Bytes %.0f\n",u/k,m*1048576}' >>"$s"
    awk -v f="$s" -v p="$orca_metrics_pod_uid" -v t="$(date -u +%Y-%m-%dT%H:%M:%SZ)" -v r="$([ "$n" -lt 60 ] && echo ',"StorageResolution":1')" -v j='{"MetricName":"%s","Dimensions":[{"Name":"PodUID","Value":"%s"}%s],"Timestamp":"%s","Value":%s,"Unit":"%s"%s}' -v d=',{"Name":"%s","Value":"%s"}' '(NR-1)%1000==0{if(o)print "]">o;o=f"."NR;printf "[">o;c=""} {printf "%s" j,c,$1,p,(NF>3?sprintf(d,$4,$5):""),t,$3,$2,r>o;c=","} END{if(o)print "]">o}' "$s"
    for file in "$s".*; do
      [ -e "$file" ] || continue
      aws cloudwatch put-metric-data ${orca_region:+--region "$orca_region"} --namespace "$orca_metrics_namespace" --metric-data "file://$file" >/dev/null 2>"$orca_state/publish.err" ||
        echo "orca: publishing the pod's metrics failed: $(tail -n 1 "$orca_state/publish.err")"
    done
    orca_sleep $((n - $(date +%s) % n))
  done
}

# @WORKLOAD@

orca_main() {
  local i pid code init_policy=$orca_restart_policy mains=()
  orca_sidecars=()
  mkdir -p "$orca_state" "$orca_root/volumes"
  echo "orca: running pod $orca_pod"
  # Whatever goes wrong below, the instance must still report and power off.
  trap 'orca_finish 125' EXIT
  # Before the facts, which measure the disk it may set up, and before Docker starts.
  $orca_disk_setup
  orca_facts
  if [ "$orca_metrics_interval" -gt 0 ]; then
    orca_sample &
    orca_sampler=$!
  fi
  if ! orca_docker_ready; then
    orca_say "$orca_default" "Docker is not running on this instance; orca needs an AMI with Docker, curl and the AWS CLI v2"
    orca_finish 125
  fi
  if ! orca_volumes 2>"$orca_state/volumes.err"; then
    orca_say "$orca_default" "preparing the pod's volumes failed:"
    orca_say_file "$orca_default" "$orca_state/volumes.err"
    orca_finish 125
  fi
  # Init containers restart on failure unless the pod says Never, as the kubelet does.
  [ "$init_policy" = Always ] && init_policy=OnFailure
  : >"$orca_state/exits"
  for i in "${!orca_names[@]}"; do
    case ${orca_kinds[$i]} in
      init)
        orca_run "$i" "$init_policy" || orca_finish "$?"
        ;;
      sidecar)
        orca_run "$i" Always &
        pid=$!
        orca_sidecars+=("$i")
        # The next container starts once the sidecar runs; a sidecar that cannot start fails the pod.
        while [ ! -e "$orca_state/${orca_names[$i]}.started" ]; do
          kill -0 "$pid" 2>/dev/null || orca_finish 125
          sleep 1
        done
        ;;
      main)
        {
          orca_run "$i" "$orca_restart_policy"
          echo "$?" >>"$orca_state/exits"
        } &
        mains+=("$!")
        ;;
    esac
  done
  for pid in "${mains[@]}"; do
    wait "$pid"
  done
  # The pod's exit code: the first non-zero one, in the order the containers ended.
  code=0
  while read -r i; do
    if [ "$i" -ne 0 ]; then
      code=$i
      break
    fi
  done <"$orca_state/exits"
  orca_finish "$code"
}

orca_main
