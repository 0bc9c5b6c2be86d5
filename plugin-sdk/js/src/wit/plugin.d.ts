// Generated from plugin-sdk/wit/since_v0.3.0 by `plugin-sdk/js/build types` (jco guest-types). Do not edit.
/// <reference path="./interfaces/orca-policy-host.d.ts" />
/// <reference path="./interfaces/orca-policy-policy.d.ts" />
/// <reference path="./interfaces/orca-policy-types.d.ts" />
declare module 'orca:policy/plugin@0.3.0' {
  export type * as OrcaPolicyHost030 from 'orca:policy/host@0.3.0'; // import orca:policy/host@0.3.0
  export type * as OrcaPolicyTypes030 from 'orca:policy/types@0.3.0'; // import orca:policy/types@0.3.0
  export * as policy from 'orca:policy/policy@0.3.0'; // export orca:policy/policy@0.3.0
}
