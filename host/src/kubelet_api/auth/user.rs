//! Who a request comes from, in the apiserver's terms: name, uid, groups and extra.

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::UserInfo;

/// The group the apiserver gives every authenticated user.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// The group of anonymous users; a user in it must not also be made authenticated.
const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";

/// An authenticated caller of the kubelet API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// The user of a verified client certificate: its Common Name and Organizations.
    ///
    /// # Guarantees
    /// `groups` includes `system:authenticated`, as the apiserver's (and the kubelet's)
    /// authenticated-group adder makes it, so RBAC bindings to that group apply.
    pub fn from_certificate(name: String, groups: Vec<String>) -> User {
        User {
            name,
            uid: String::new(),
            groups,
            extra: BTreeMap::new(),
        }
        .with_authenticated_group()
    }

    /// The user a TokenReview vouched for; `None` when it names no user, which RBAC could not
    /// tell apart from any other nameless caller.
    pub(super) fn from_user_info(info: UserInfo) -> Option<User> {
        let name = info.username.filter(|name| !name.is_empty())?;
        Some(
            User {
                name,
                uid: info.uid.unwrap_or_default(),
                groups: info.groups.unwrap_or_default(),
                extra: info.extra.unwrap_or_default(),
            }
            .with_authenticated_group(),
        )
    }

    /// Adds `system:authenticated` unless the user already says whether it is authenticated,
    /// as `group.AuthenticatedGroupAdder` does in the kubelet's authenticator chain.
    fn with_authenticated_group(mut self) -> User {
        let marked = self
            .groups
            .iter()
            .any(|group| group == AUTHENTICATED_GROUP || group == UNAUTHENTICATED_GROUP);
        if !marked {
            self.groups.push(AUTHENTICATED_GROUP.to_string());
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_user_gets_the_authenticated_group_once() {
        let user = User::from_certificate("kube-apiserver".into(), vec!["system:masters".into()]);
        assert_eq!(user.groups, ["system:masters", AUTHENTICATED_GROUP]);
        let again = User::from_certificate(user.name.clone(), user.groups.clone());
        assert_eq!(again.groups, ["system:masters", AUTHENTICATED_GROUP]);
    }

    #[test]
    fn token_review_user_without_a_name_is_no_user() {
        let info = UserInfo {
            username: Some(String::new()),
            ..UserInfo::default()
        };
        assert_eq!(User::from_user_info(info), None);
    }
}
