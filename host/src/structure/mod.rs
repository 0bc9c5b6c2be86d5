//! Tests that hold orca's source to a rule, reading it as text: no import cycle between files
//! ([`import_cycles`]), no long function where a pod's launch goes ([`function_length`]), and
//! the reader they share ([`source_text`]), which the IAM test in `provider/aws/permissions`
//! uses too.

mod function_length;
mod import_cycles;
pub mod source_text;
