use std::path::PathBuf;

use sigstore::cosign::Constraint;
use sigstore::cosign::constraint::PrivateKeySigner;
use sigstore::cosign::signature_layers::{CertificateSignature, CertificateSubject};
use sigstore::crypto::SigningScheme;
use sigstore::crypto::signing_key::SigStoreKeyPair;

use super::*;
use crate::config::RegistryConfig;

const DIGEST: &str = "sha256:6c6230b022d60d662c87660202dd3323c4abcd07683a3991c130f9217f07c483";
const ISSUER: &str = "https://token.actions.githubusercontent.com";
const WORKFLOW: &str = "https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main";
const SCHEME: SigningScheme = SigningScheme::ECDSA_P256_SHA256_ASN1;

/// A P-256 key pair, as `cosign generate-key-pair` makes, with its public key in a file.
struct Key {
    pair: SigStoreKeyPair,
    public: PathBuf,
    fingerprint: String,
}

fn key(dir: &Path, name: &str) -> Key {
    let pair = SCHEME
        .create_signer()
        .unwrap()
        .to_sigstore_keypair()
        .unwrap();
    let public = dir.join(format!("{name}.pub"));
    std::fs::write(&public, pair.public_key_to_pem().unwrap()).unwrap();
    let fingerprint = fingerprint(&pair.public_key_to_der().unwrap());
    Key {
        pair,
        public,
        fingerprint,
    }
}

/// A cosign SimpleSigning layer for [`DIGEST`], signed by `key`.
fn signed_by(key: &Key) -> SignatureLayer {
    let image = format!("127.0.0.1:5000/team/p@{DIGEST}").parse().unwrap();
    let mut layer = SignatureLayer::new_unsigned(&image, DIGEST).unwrap();
    let signer = PrivateKeySigner::new_with_signer(key.pair.to_sigstore_signer(&SCHEME).unwrap());
    assert!(signer.add_constraint(&mut layer).unwrap());
    layer
}

/// A layer signed by `key` whose certificate (as the sigstore client sets it once the
/// certificate chains to the trust root) names `subject` from `issuer` and holds
/// `certified`'s public key.
fn keyless(
    key: &Key,
    certified: &Key,
    subject: CertificateSubject,
    issuer: &str,
) -> SignatureLayer {
    let mut layer = signed_by(key);
    layer.certificate_signature = Some(CertificateSignature {
        verification_key: certified.pair.to_verification_key(&SCHEME).unwrap(),
        subject,
        issuer: Some(issuer.to_owned()),
        github_workflow_trigger: None,
        github_workflow_sha: None,
        github_workflow_name: None,
        github_workflow_repository: None,
        github_workflow_ref: None,
    });
    layer
}

fn policy(
    rules: Vec<VerifyRuleConfig>,
    trust_root: Option<SigstoreTrustRootConfig>,
) -> Result<TrustPolicy, ConfigError> {
    let config = RegistryConfig {
        verify: rules,
        sigstore_trust_root: trust_root,
        ..RegistryConfig::default()
    };
    TrustPolicy::from_config(&config)
}

fn reference(text: &str) -> PluginReference {
    PluginReference::parse(text).unwrap()
}

/// A Fulcio certificate and a Rekor key as files, so a keyless rule builds.
fn trust_root_files(dir: &Path) -> SigstoreTrustRootConfig {
    let ca = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let cert = params.self_signed(&ca).unwrap();
    let fulcio = dir.join("fulcio.pem");
    std::fs::write(&fulcio, cert.pem()).unwrap();
    let rekor = dir.join("rekor.pub");
    std::fs::write(&rekor, key(dir, "rekor").pair.public_key_to_pem().unwrap()).unwrap();
    SigstoreTrustRootConfig {
        fulcio_certs: vec![fulcio],
        rekor_keys: vec![rekor],
    }
}

/// The team's key and a rogue one, and a policy allowing the team's key, a release workflow
/// and a release email (the files in `_dir`).
struct Judging {
    _dir: tempfile::TempDir,
    team: Key,
    rogue: Key,
    policy: TrustPolicy,
}

fn judging() -> Judging {
    let dir = tempfile::tempdir().unwrap();
    let team = key(dir.path(), "team");
    let rogue = key(dir.path(), "rogue");
    let policy = policy(
        vec![VerifyRuleConfig {
            references: Vec::new(),
            keys: vec![team.public.clone()],
            keyless: vec![
                KeylessIdentityConfig {
                    issuer: ISSUER.to_owned(),
                    subject: WORKFLOW.to_owned(),
                },
                KeylessIdentityConfig {
                    issuer: "https://accounts.google.com".to_owned(),
                    subject: "release@example.com".to_owned(),
                },
            ],
        }],
        Some(trust_root_files(dir.path())),
    )
    .unwrap();
    Judging {
        _dir: dir,
        team,
        rogue,
        policy,
    }
}

/// A signer, or the kind of refusal: `missing`, `invalid` or `not allowed`.
type Expected = Result<Signer, &'static str>;

/// Judges each case's layers by [`judging`]'s policy; every refusal must name what was
/// expected and the digest.
fn assert_judged(
    judging: &Judging,
    cases: Vec<(&str, Vec<SignatureLayer>, SignatureManifest, Expected)>,
) {
    let team = &judging.team;
    let rule = judging
        .policy
        .rule_for(&reference("oci://127.0.0.1:5000/team/p:stable"))
        .unwrap();
    for (name, layers, manifest, expected) in cases {
        let got = judge(rule, DIGEST, &layers, manifest);
        match (&got, &expected) {
            (Ok(signer), Ok(wanted)) => assert_eq!(signer, wanted, "{name}"),
            (Err(error), Err(kind)) => {
                let matches = match error {
                    SignatureError::Missing { .. } => *kind == "missing",
                    SignatureError::Invalid { .. } => *kind == "invalid",
                    SignatureError::SignerNotAllowed { .. } => *kind == "not allowed",
                    SignatureError::Unreachable { .. } => false,
                };
                assert!(matches, "{name}: {error}");
                // Every refusal names what was expected and the digest.
                let message = error.to_string();
                assert!(
                    message.contains(&team.fingerprint)
                        && message.contains(WORKFLOW)
                        && message.contains(DIGEST),
                    "{name}: {message}"
                );
            }
            _ => panic!("{name}: got {got:?}, expected {expected:?}"),
        }
    }
}

#[test]
fn signatures_by_key_are_judged_against_the_allowed_keys() {
    let judging = judging();
    let (team, rogue) = (&judging.team, &judging.rogue);
    let mut tampered = signed_by(team);
    tampered.raw_data.extend_from_slice(b" ");
    let team_key = Signer::Key {
        fingerprint: team.fingerprint.clone(),
    };
    let cases = vec![
        (
            "signed by the allowed key",
            vec![signed_by(team)],
            SignatureManifest::Present,
            Ok(team_key.clone()),
        ),
        (
            "signed by another key",
            vec![signed_by(rogue)],
            SignatureManifest::Present,
            Err("not allowed"),
        ),
        (
            "no signature and no .sig tag",
            vec![],
            SignatureManifest::Absent,
            Err("missing"),
        ),
        (
            "a .sig tag whose layers are not signatures of the digest",
            vec![],
            SignatureManifest::Present,
            Err("invalid"),
        ),
        (
            "the payload changed after it was signed",
            vec![tampered],
            SignatureManifest::Present,
            Err("not allowed"),
        ),
        (
            "another key's signature beside the allowed one",
            vec![signed_by(rogue), signed_by(team)],
            SignatureManifest::Present,
            Ok(team_key),
        ),
    ];
    assert_judged(&judging, cases);
}

#[test]
fn keyless_signatures_are_judged_against_the_allowed_identities() {
    let judging = judging();
    let (team, rogue) = (&judging.team, &judging.rogue);
    let workflow = || CertificateSubject::Uri(WORKFLOW.to_owned());
    let by_workflow = Signer::Keyless {
        issuer: ISSUER.to_owned(),
        subject: WORKFLOW.to_owned(),
    };
    let cases = vec![
        (
            "keyless, the allowed workflow",
            vec![keyless(rogue, rogue, workflow(), ISSUER)],
            SignatureManifest::Present,
            Ok(by_workflow),
        ),
        (
            "keyless, the allowed email",
            vec![keyless(
                rogue,
                rogue,
                CertificateSubject::Email("release@example.com".to_owned()),
                "https://accounts.google.com",
            )],
            SignatureManifest::Present,
            Ok(Signer::Keyless {
                issuer: "https://accounts.google.com".to_owned(),
                subject: "release@example.com".to_owned(),
            }),
        ),
        (
            "keyless, another workflow",
            vec![keyless(
                rogue,
                rogue,
                CertificateSubject::Uri(
                    "https://github.com/org/fork/.github/workflows/release.yml@refs/heads/main"
                        .to_owned(),
                ),
                ISSUER,
            )],
            SignatureManifest::Present,
            Err("not allowed"),
        ),
        (
            "keyless, the allowed subject from another issuer",
            vec![keyless(
                rogue,
                rogue,
                workflow(),
                "https://issuer.example.com",
            )],
            SignatureManifest::Present,
            Err("not allowed"),
        ),
        (
            "keyless, the allowed identity, but signed by a key it does not certify",
            vec![keyless(rogue, team, workflow(), ISSUER)],
            SignatureManifest::Present,
            Err("not allowed"),
        ),
    ];
    assert_judged(&judging, cases);
}

#[test]
fn a_refusal_names_the_signers_found() {
    let dir = tempfile::tempdir().unwrap();
    let team = key(dir.path(), "team");
    let rogue = key(dir.path(), "rogue");
    let policy = policy(
        vec![VerifyRuleConfig {
            keys: vec![team.public.clone()],
            ..VerifyRuleConfig::default()
        }],
        None,
    )
    .unwrap();
    let rule = policy
        .rule_for(&reference("oci://r.example/a/b:v1"))
        .unwrap();
    let layers = [
        signed_by(&rogue),
        keyless(
            &rogue,
            &rogue,
            CertificateSubject::Email("dev@example.com".to_owned()),
            ISSUER,
        ),
    ];
    let error = judge(rule, DIGEST, &layers, SignatureManifest::Present).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "{DIGEST} is signed, but not by an allowed signer: found a signature no allowed key verifies; keyless dev@example.com (issuer {ISSUER}); expected key {} ({})",
            team.public.display(),
            team.fingerprint
        )
    );
}

/// `text`, covered by the rule of `key` (whose signatures are by `signer`): judged signed by
/// it, and a version kept on disk loads again only under a signer still allowed, not
/// unsigned nor under `other`.
fn assert_covered(policy: &TrustPolicy, text: &str, key: &Key, signer: &Signer, other: &Signer) {
    let plugin = reference(text);
    let rule = policy
        .rule_for(&plugin)
        .unwrap_or_else(|| panic!("{text} is covered"));
    let layers = [signed_by(key)];
    assert_eq!(
        judge(rule, DIGEST, &layers, SignatureManifest::Present).as_ref(),
        Ok(signer),
        "{text}"
    );
    assert!(policy.still_allows(&plugin, Some(signer)), "{text}");
    assert!(!policy.still_allows(&plugin, None), "{text}: unsigned");
    assert!(
        !policy.still_allows(&plugin, Some(other)),
        "{text}: {other}"
    );
}

#[test]
fn the_first_entry_covering_a_reference_applies_and_others_load_unsigned() {
    let dir = tempfile::tempdir().unwrap();
    let team = key(dir.path(), "team");
    let ops = key(dir.path(), "ops");
    let rule = |references: &[&str], key: &Key| VerifyRuleConfig {
        references: references.iter().map(|r| (*r).to_owned()).collect(),
        keys: vec![key.public.clone()],
        keyless: Vec::new(),
    };
    let policy = policy(
        vec![
            rule(&["oci://registry.example.com/team/*"], &team),
            rule(
                &[
                    "oci://registry.example.com/*",
                    "oci://other.example.com/ops/selector:stable",
                ],
                &ops,
            ),
        ],
        None,
    )
    .unwrap();
    let team_signed = Signer::Key {
        fingerprint: team.fingerprint.clone(),
    };
    let ops_signed = Signer::Key {
        fingerprint: ops.fingerprint.clone(),
    };
    let cases = [
        (
            "oci://registry.example.com/team/selector:stable",
            Some(&team_signed),
        ),
        (
            "oci://registry.example.com/team/nested/selector@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            Some(&team_signed),
        ),
        (
            "oci://registry.example.com/platform/tagger:v2",
            Some(&ops_signed),
        ),
        (
            "oci://other.example.com/ops/selector:stable",
            Some(&ops_signed),
        ),
        ("oci://other.example.com/ops/selector:canary", None),
        ("oci://registry.example.org/team/selector:stable", None),
    ];
    for (text, wanted) in cases {
        let plugin = reference(text);
        let rule = policy.rule_for(&plugin);
        match wanted {
            None => {
                assert!(rule.is_none(), "{text} is not covered");
                assert!(policy.still_allows(&plugin, None), "{text} loads unsigned");
            }
            Some(signer) if signer == &team_signed => {
                assert_covered(&policy, text, &team, signer, &ops_signed);
            }
            Some(signer) => assert_covered(&policy, text, &ops, signer, &team_signed),
        }
    }
}

/// Builds a policy of each case's one entry and trust root; each must be refused naming the
/// field.
fn assert_refused(cases: Vec<(VerifyRuleConfig, Option<SigstoreTrustRootConfig>, &str)>) {
    for (rule, trust_root, field) in cases {
        let error = policy(vec![rule.clone()], trust_root)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(&format!("invalid {field}")),
            "{rule:?}: {error}"
        );
    }
}

#[test]
fn unusable_keys_and_references_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let team = key(dir.path(), "team");
    let not_a_key = dir.path().join("not-a-key.pub");
    std::fs::write(&not_a_key, "hello").unwrap();
    assert_refused(vec![
        (
            VerifyRuleConfig::default(),
            None,
            "policy.registry.verify[0]: ",
        ),
        (
            VerifyRuleConfig {
                keys: vec![dir.path().join("absent.pub")],
                ..VerifyRuleConfig::default()
            },
            None,
            "policy.registry.verify[0].keys[0]: ",
        ),
        (
            VerifyRuleConfig {
                keys: vec![not_a_key],
                ..VerifyRuleConfig::default()
            },
            None,
            "policy.registry.verify[0].keys[0]: ",
        ),
        (
            VerifyRuleConfig {
                references: vec!["registry.example.com/team/*".to_owned()],
                keys: vec![team.public.clone()],
                ..VerifyRuleConfig::default()
            },
            None,
            "policy.registry.verify[0].references[0]: ",
        ),
        (
            VerifyRuleConfig {
                references: vec!["oci://registry.example.com/team/[".to_owned()],
                keys: vec![team.public.clone()],
                ..VerifyRuleConfig::default()
            },
            None,
            "policy.registry.verify[0].references[0]: ",
        ),
    ]);
    assert!(policy(Vec::new(), None).unwrap().is_empty());
}

#[test]
fn unusable_keyless_identities_and_trust_roots_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let team = key(dir.path(), "team");
    let workflow = KeylessIdentityConfig {
        issuer: ISSUER.to_owned(),
        subject: WORKFLOW.to_owned(),
    };
    assert_refused(vec![
        (
            VerifyRuleConfig {
                keyless: vec![KeylessIdentityConfig {
                    issuer: ISSUER.to_owned(),
                    subject: " ".to_owned(),
                }],
                ..VerifyRuleConfig::default()
            },
            Some(trust_root_files(dir.path())),
            "policy.registry.verify[0].keyless[0]: ",
        ),
        (
            VerifyRuleConfig {
                keyless: vec![workflow.clone()],
                ..VerifyRuleConfig::default()
            },
            None,
            "policy.registry.sigstoreTrustRoot: ",
        ),
        (
            VerifyRuleConfig {
                keyless: vec![workflow],
                ..VerifyRuleConfig::default()
            },
            Some(SigstoreTrustRootConfig {
                fulcio_certs: vec![team.public.clone()],
                rekor_keys: vec![team.public.clone()],
            }),
            "policy.registry.sigstoreTrustRoot.fulcioCerts[0]: ",
        ),
    ]);
}
