import type { AnnotationError, PolicyErrorValue } from './types.js';

/** The `policy-error` case names: `no-match`, `declined`, … */
export type PolicyErrorKind = PolicyErrorValue['tag'];

/**
 * Why a hook could not decide; throw it from a hook. The component bindings (jco's convention
 * for `result<T, E>` exports) send the own `payload` property to the host as the WIT
 * `policy-error` variant. Any other exception traps the plugin: orca's `crashed`.
 */
export class PolicyError extends Error {
  /** The WIT value sent to the host. */
  readonly payload: PolicyErrorValue;

  constructor(payload: PolicyErrorValue) {
    super(describe(payload));
    this.name = 'PolicyError';
    this.payload = payload;
  }

  /** Not this plugin's pod: orca asks the next plugin in the chain. */
  static declined(why: string): PolicyError {
    return new PolicyError({ tag: 'declined', val: why });
  }
  /** The pod is this plugin's, and nothing it allows fits (say what was asked for). */
  static noMatch(what: string): PolicyError {
    return new PolicyError({ tag: 'no-match', val: what });
  }
  /** The plugin's settings from config.yaml are wrong. */
  static invalidSettings(what: string): PolicyError {
    return new PolicyError({ tag: 'invalid-settings', val: what });
  }
  /** A pod annotation the plugin cannot use, and what would be accepted. */
  static invalidAnnotation(annotation: string, value: string, expected: string): PolicyError;
  static invalidAnnotation(error: AnnotationError): PolicyError;
  static invalidAnnotation(
    annotation: string | AnnotationError,
    value?: string,
    expected?: string,
  ): PolicyError {
    const val =
      typeof annotation === 'string'
        ? { annotation, value: value ?? '', expected: expected ?? '' }
        : annotation;
    return new PolicyError({ tag: 'invalid-annotation', val });
  }
  /** Anything else. */
  static failed(what: string): PolicyError {
    return new PolicyError({ tag: 'failed', val: what });
  }
  /** The plugin does not implement this hook. */
  static unsupported(): PolicyError {
    return new PolicyError({ tag: 'unsupported' });
  }

  /** The case: `declined`, `no-match`, … */
  get kind(): PolicyErrorKind {
    return this.payload.tag;
  }
}

function describe(error: PolicyErrorValue): string {
  switch (error.tag) {
    case 'invalid-annotation': {
      const { annotation, value, expected } = error.val;
      return `invalid-annotation: ${annotation}=${JSON.stringify(value)}: expected ${expected}`;
    }
    case 'unsupported':
      return 'unsupported';
    default:
      return `${error.tag}: ${error.val}`;
  }
}

/** Whether `error` is a {@link PolicyError}, of `kind` when given. */
export function isPolicyError(error: unknown, kind?: PolicyErrorKind): error is PolicyError {
  return error instanceof PolicyError && (kind === undefined || error.kind === kind);
}
