// Generated from plugin-sdk/wit/since_v0.3.0 by `plugin-sdk/js/build types` (jco guest-types). Do not edit.
/// <reference path="./orca-policy-types.d.ts" />
declare module 'orca:policy/policy@0.3.0' {
  export function info(): PluginInfo;
  /**
   * Ranked instance types for the pod, best first; the provider tries them in order.
   */
  export function selectInstance(pod: Pod, settings: string): Array<Candidate>;
  /**
   * Spot or on-demand for the pod, given the selector's candidates.
   */
  export function chooseMarket(pod: Pod, settings: string, candidates: Array<Candidate>): MarketDecision;
  /**
   * Tags for the pod's instance and volumes. The host validates them against AWS's rules.
   */
  export function buildTags(pod: Pod, settings: string, context: TagContext): Array<Tag>;
  export type Pod = import('orca:policy/types@0.3.0').Pod;
  export type Candidate = import('orca:policy/types@0.3.0').Candidate;
  export type MarketDecision = import('orca:policy/types@0.3.0').MarketDecision;
  export type Tag = import('orca:policy/types@0.3.0').Tag;
  export type TagContext = import('orca:policy/types@0.3.0').TagContext;
  export type PolicyError = import('orca:policy/types@0.3.0').PolicyError;
  export type PluginInfo = import('orca:policy/types@0.3.0').PluginInfo;
}
