// The WIT records of orca:policy@0.3.0 under the SDK's names. The declarations are generated
// (src/wit, `build types`); these are type-only re-exports, erased from the JavaScript.
/// <reference path="./wit/plugin.d.ts" />

export type {
  AllocationStrategy,
  AnnotationError,
  Architecture,
  Candidate,
  Hook,
  InstanceType,
  Market,
  MarketDecision,
  PluginInfo,
  Pod,
  PolicyError as PolicyErrorValue,
  Resources,
  StringMap,
  Tag,
  TagContext,
  Toleration,
} from 'orca:policy/types@0.3.0';
export type { InstanceQuery, LogLevel } from 'orca:policy/host@0.3.0';

/** The interface version this SDK implements; stamped into every plugin it builds. */
export const INTERFACE_VERSION = '0.3.0';
