//! Tests that hold orca's source to a rule, reading it as text: no import cycle between files
//! ([`import_cycles`]), and the reader they share ([`source_text`]), which the IAM test in
//! `provider/aws/permissions` uses too.

mod import_cycles;
pub mod source_text;
