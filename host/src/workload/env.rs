//! A container's environment, resolved as the kubelet resolves it (`makeEnvironmentVariables`):
//! `envFrom` first, in order, then `env` in order, a later variable replacing an earlier one
//! of the same name; `$(VAR)` in `env[].value` refers to variables set before it.
//!
//! Unlike the kubelet, orca adds no service-link variables (`KUBERNETES_SERVICE_HOST`, …):
//! instances are outside the cluster network.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, EnvFromSource, EnvVarSource, Pod};

use super::fields::{FieldError, field_value, resource_value};
use super::source::{EnvSourceError, ObjectData, ObjectKind, Objects};
use super::value::{EnvValue, expand};

/// Why a container's environment could not be resolved. Each message names the container,
/// where in its spec (`env NAME` or `envFrom`), and the object, as the pod status shows it:
/// `container "trainer": env WANDB_API_KEY: secret "wandb" has no key "api-key"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("container {container:?}: {site}: {kind} {name:?} not found")]
    ObjectNotFound {
        container: String,
        site: String,
        kind: ObjectKind,
        name: String,
    },
    #[error("container {container:?}: {site}: {kind} {name:?} has no key {key:?}")]
    KeyNotFound {
        container: String,
        site: String,
        kind: ObjectKind,
        name: String,
        key: String,
    },
    /// The message carries the cause's text because it goes to the pod status whole.
    #[error("container {container:?}: {site}: reading {kind} {name:?} failed: {cause}")]
    LookupFailed {
        container: String,
        site: String,
        kind: ObjectKind,
        name: String,
        cause: EnvSourceError,
    },
    #[error("container {container:?}: {site}: {problem}")]
    Unsupported {
        container: String,
        site: String,
        problem: String,
    },
    /// A downward-API field the pod cannot have. The message carries the cause's text because
    /// it goes to the pod status whole.
    #[error("container {container:?}: {site}: {cause}")]
    Field {
        container: String,
        site: String,
        cause: FieldError,
    },
}

impl EnvError {
    /// Whether a retry may succeed without the pod changing: the object or key may be created
    /// later (the kubelet waits for it too), or the apiserver may answer next time.
    pub fn may_resolve_later(&self) -> bool {
        !matches!(self, EnvError::Unsupported { .. } | EnvError::Field { .. })
    }
}

/// Variables in the order they were first set, each name once.
#[derive(Default)]
struct Environment {
    entries: Vec<(String, EnvValue)>,
    index: HashMap<String, usize>,
}

impl Environment {
    fn set(&mut self, name: String, value: EnvValue) {
        match self.index.get(&name) {
            Some(&at) => self.entries[at].1 = value,
            None => {
                self.index.insert(name.clone(), self.entries.len());
                self.entries.push((name, value));
            }
        }
    }

    fn get(&self, name: &str) -> Option<&EnvValue> {
        self.index.get(name).map(|&at| &self.entries[at].1)
    }
}

/// The container's environment, with the `envFrom` keys that were skipped for not being
/// valid variable names (the kubelet skips them too, with an `InvalidEnvironmentVariableNames`
/// Event).
pub(crate) struct ResolvedEnv {
    pub(crate) vars: Vec<(String, EnvValue)>,
    pub(crate) skipped_keys: Vec<String>,
}

impl ResolvedEnv {
    /// The value of a variable, for `$(VAR)` in the command and arguments.
    pub(crate) fn lookup(&self, name: &str) -> Option<&EnvValue> {
        self.vars.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

/// Resolves the container's `envFrom` and `env`.
///
/// # Errors
/// [`EnvError`] for a missing ConfigMap, Secret or key that is not `optional`, an object that
/// could not be read, or a reference orca cannot answer.
pub(crate) async fn resolve_env(
    pod: &Pod,
    container: &Container,
    objects: &mut Objects<'_>,
) -> Result<ResolvedEnv, EnvError> {
    let mut environment = Environment::default();
    let mut skipped_keys = Vec::new();
    for source in container.env_from.iter().flatten() {
        add_env_from(
            container,
            source,
            objects,
            &mut environment,
            &mut skipped_keys,
        )
        .await?;
    }
    for var in container.env.iter().flatten() {
        let site = format!("env {}", var.name);
        let value = match (var.value.as_deref(), var.value_from.as_ref()) {
            (Some(text), _) if !text.is_empty() => Some(expand(text, |name| environment.get(name))),
            (_, Some(from)) => value_from(pod, container, &site, from, objects).await?,
            _ => Some(EnvValue::default()),
        };
        // An optional reference to something missing sets nothing, not even an empty value.
        if let Some(value) = value {
            environment.set(var.name.clone(), value);
        }
    }
    Ok(ResolvedEnv {
        vars: environment.entries,
        skipped_keys,
    })
}

async fn add_env_from(
    container: &Container,
    source: &EnvFromSource,
    objects: &mut Objects<'_>,
    environment: &mut Environment,
    skipped_keys: &mut Vec<String>,
) -> Result<(), EnvError> {
    let (kind, name, optional) = match (&source.config_map_ref, &source.secret_ref) {
        (Some(r), _) => (ObjectKind::ConfigMap, &r.name, r.optional),
        (None, Some(r)) => (ObjectKind::Secret, &r.name, r.optional),
        (None, None) => {
            return Err(EnvError::Unsupported {
                container: container.name.clone(),
                site: "envFrom".to_owned(),
                problem: "an envFrom entry names neither configMapRef nor secretRef".to_owned(),
            });
        }
    };
    let site = "envFrom";
    let Some(data) = read(container, site, kind, name, objects).await? else {
        if optional == Some(true) {
            return Ok(());
        }
        return Err(EnvError::ObjectNotFound {
            container: container.name.clone(),
            site: site.to_owned(),
            kind,
            name: name.clone(),
        });
    };
    let prefix = source.prefix.as_deref().unwrap_or("");
    for (key, value) in data.iter() {
        let variable = format!("{prefix}{key}");
        if is_env_var_name(&variable) {
            environment.set(variable, EnvValue::literal(value.as_str()));
        } else {
            skipped_keys.push(variable);
        }
    }
    Ok(())
}

/// A variable from `valueFrom`; `None` when an optional object or key is missing.
async fn value_from(
    pod: &Pod,
    container: &Container,
    site: &str,
    from: &EnvVarSource,
    objects: &mut Objects<'_>,
) -> Result<Option<EnvValue>, EnvError> {
    let unsupported = |problem: String| EnvError::Unsupported {
        container: container.name.clone(),
        site: site.to_owned(),
        problem,
    };
    let field = |cause: FieldError| EnvError::Field {
        container: container.name.clone(),
        site: site.to_owned(),
        cause,
    };
    if let Some(selector) = &from.field_ref {
        return field_value(pod, &selector.field_path)
            .map(Some)
            .map_err(field);
    }
    if let Some(resource) = &from.resource_field_ref {
        return resource_value(pod, container, resource)
            .map(Some)
            .map_err(field);
    }
    let (kind, name, key, optional) = match (&from.config_map_key_ref, &from.secret_key_ref) {
        (Some(r), _) => (ObjectKind::ConfigMap, &r.name, &r.key, r.optional),
        (None, Some(r)) => (ObjectKind::Secret, &r.name, &r.key, r.optional),
        (None, None) if from.file_key_ref.is_some() => {
            return Err(unsupported(
                "fileKeyRef is not supported on orca nodes; use configMapKeyRef or secretKeyRef"
                    .to_owned(),
            ));
        }
        (None, None) => return Err(unsupported("valueFrom names no source".to_owned())),
    };
    let optional = optional == Some(true);
    let Some(data) = read(container, site, kind, name, objects).await? else {
        if optional {
            return Ok(None);
        }
        return Err(EnvError::ObjectNotFound {
            container: container.name.clone(),
            site: site.to_owned(),
            kind,
            name: name.clone(),
        });
    };
    match data.get(key) {
        Some(value) => Ok(Some(EnvValue::literal(value.as_str()))),
        None if optional => Ok(None),
        None => Err(EnvError::KeyNotFound {
            container: container.name.clone(),
            site: site.to_owned(),
            kind,
            name: name.clone(),
            key: key.clone(),
        }),
    }
}

async fn read(
    container: &Container,
    site: &str,
    kind: ObjectKind,
    name: &str,
    objects: &mut Objects<'_>,
) -> Result<Option<Arc<ObjectData>>, EnvError> {
    objects
        .get(kind, name)
        .await
        .map_err(|cause| EnvError::LookupFailed {
            container: container.name.clone(),
            site: site.to_owned(),
            kind,
            name: name.to_owned(),
            cause,
        })
}

/// The kubelet's test for `envFrom` keys (`IsEnvVarName`): letters, digits, `_`, `-` and `.`,
/// not starting with a digit.
pub(crate) fn is_env_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    chars
        .next()
        .is_some_and(|first| word(first) && !first.is_ascii_digit())
        && chars.all(word)
}

#[cfg(test)]
mod tests;
