// Generated from plugin-sdk/wit/since_v0.3.0 by `plugin-sdk/js/build types` (jco guest-types). Do not edit.
/// <reference path="./orca-policy-types.d.ts" />
declare module 'orca:policy/host@0.3.0' {
  /**
   * A line in orca's log, attributed to the plugin.
   */
  export function log(level: LogLevel, message: string): void;
  /**
   * The matching types, cheapest on-demand price first (unknown prices last, then by name).
   */
  export function queryInstanceTypes(query: InstanceQuery): Array<InstanceType>;
  export type Architecture = import('orca:policy/types@0.3.0').Architecture;
  export type InstanceType = import('orca:policy/types@0.3.0').InstanceType;
  /**
   * # Variants
   * 
   * ## `"trace"`
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"warn"`
   * 
   * ## `"error"`
   */
  export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';
  /**
   * A filter over the instance-type catalogue, applied host-side: passing the whole
   * catalogue (800+ types) into every call would cost more than the call.
   */
  export interface InstanceQuery {
    minVcpus: number,
    minMemoryMib: bigint,
    minGpus: number,
    architecture?: Architecture,
    /**
     * Only these families (`p5`, `m7g`); empty: every family.
     */
    families: Array<string>,
    excludeFamilies: Array<string>,
    /**
     * Only these exact type names; empty: every name.
     */
    names: Array<string>,
    /**
     * At most this many results; 0: no limit.
     */
    limit: number,
    /**
     * Only types offered in at least one of these availability zones (types whose zones the
     * catalogue does not know are kept); empty: every zone. New in 0.3.0.
     */
    zones: Array<string>,
  }
}
