// Defining a plugin: the hooks it implements; the others answer `unsupported`.
import { PolicyError } from './errors.js';
import { log } from './host.js';
import type {
  Candidate,
  Hook,
  MarketDecision,
  PluginInfo,
  Pod,
  Tag,
  TagContext,
} from './types.js';

/** What a plugin author writes: a name, a version and the hooks it implements. */
export interface PluginDefinition {
  /** 1 to 63 printable ASCII characters without spaces; a config.yaml chain names it. */
  name: string;
  /** 1 to 63 printable ASCII characters without spaces. */
  version: string;
  /** The hooks orca calls; by default those this definition implements. */
  hooks?: Hook[];
  /** Instance types for the pod, best first. Throw a {@link PolicyError} to refuse. */
  selectInstance?(pod: Pod, settings: string): Candidate[];
  /** Spot or on-demand, given the selector's candidates. */
  chooseMarket?(pod: Pod, settings: string, candidates: Candidate[]): MarketDecision;
  /** Tags for the pod's instance and volumes. */
  buildTags?(pod: Pod, settings: string, context: TagContext): Tag[];
}

/** A plugin: the shape of the component's `orca:policy/policy@0.3.0` export. */
export interface Plugin {
  info(): PluginInfo;
  selectInstance(pod: Pod, settings: string): Candidate[];
  chooseMarket(pod: Pod, settings: string, candidates: Candidate[]): MarketDecision;
  buildTags(pod: Pod, settings: string, context: TagContext): Tag[];
}

const HOOK_METHODS = {
  'select-instance': 'selectInstance',
  'choose-market': 'chooseMarket',
  'build-tags': 'buildTags',
} as const satisfies Record<Hook, keyof PluginDefinition>;

const NAME = /^[\x21-\x7e]{1,63}$/;

/**
 * The plugin of `definition`: every hook it does not implement throws
 * `PolicyError.unsupported()`. Export it as the module's default export; `build` turns it into
 * the component's `policy` export.
 * @throws {Error} for a name or version orca would refuse, or a listed hook not implemented.
 */
export function definePlugin(definition: PluginDefinition): Plugin {
  for (const [what, value] of [
    ['name', definition.name],
    ['version', definition.version],
  ] as const) {
    if (typeof value !== 'string' || !NAME.test(value)) {
      throw new Error(
        `plugin ${what} ${JSON.stringify(value)} must be 1 to 63 printable ASCII characters without spaces`,
      );
    }
  }
  const implemented = (Object.keys(HOOK_METHODS) as Hook[]).filter(
    (hook) => typeof definition[HOOK_METHODS[hook]] === 'function',
  );
  const hooks = definition.hooks ?? implemented;
  for (const hook of hooks) {
    if (!(hook in HOOK_METHODS)) throw new Error(`unknown hook ${JSON.stringify(hook)}`);
    if (!implemented.includes(hook)) {
      throw new Error(`plugin ${definition.name} lists hook ${hook} but does not implement ${HOOK_METHODS[hook]}`);
    }
  }
  const info: PluginInfo = { name: definition.name, version: definition.version, hooks: [...hooks] };
  return {
    info: () => ({ ...info, hooks: [...info.hooks] }),
    selectInstance(pod, settings) {
      if (!definition.selectInstance) throw PolicyError.unsupported();
      return definition.selectInstance(pod, settings);
    },
    chooseMarket(pod, settings, candidates) {
      if (!definition.chooseMarket) throw PolicyError.unsupported();
      return definition.chooseMarket(pod, settings, candidates);
    },
    buildTags(pod, settings, context) {
      if (!definition.buildTags) throw PolicyError.unsupported();
      return definition.buildTags(pod, settings, context);
    },
  };
}

/**
 * The component export for `plugin` (used by the component entry). A {@link PolicyError}
 * reaches the host as the WIT variant through its own `payload` property (jco's convention);
 * a thrown plain `{tag, val}` object passes as it is. Any other exception is logged through
 * the host, then rethrown: the plugin traps, which orca records as `crashed`. orca reads that
 * error-level record to tell the exception in the pod's message, at its `.ts` line: keep its
 * form, `HOOK: uncaught NAME: MESSAGE` then the stack's lines (`fn@file:line:column`).
 */
export function exportPolicy(plugin: Plugin): Plugin {
  const guard =
    <A extends unknown[], R>(hook: string, call: (...args: A) => R) =>
    (...args: A): R => {
      try {
        return call(...args);
      } catch (error) {
        if (error instanceof PolicyError) throw error;
        if (error instanceof Error) {
          log('error', `${hook}: uncaught ${error.name}: ${error.message}${error.stack ? `\n${error.stack}` : ''}`);
        }
        throw error;
      }
    };
  return {
    info: guard('info', () => plugin.info()),
    selectInstance: guard('select-instance', (pod: Pod, settings: string) =>
      plugin.selectInstance(pod, settings),
    ),
    chooseMarket: guard('choose-market', (pod: Pod, settings: string, candidates: Candidate[]) =>
      plugin.chooseMarket(pod, settings, candidates),
    ),
    buildTags: guard('build-tags', (pod: Pod, settings: string, context: TagContext) =>
      plugin.buildTags(pod, settings, context),
    ),
  };
}

/**
 * The settings JSON parsed (`{}` when empty).
 * @throws {PolicyError} `invalid-settings` naming `plugin` when it is not JSON or not an object.
 */
export function parseSettings(plugin: string, settings: string): Record<string, unknown> {
  const text = settings.trim() === '' ? '{}' : settings;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw PolicyError.invalidSettings(`${plugin} settings: ${(error as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw PolicyError.invalidSettings(`${plugin} settings: expected a JSON object, got ${text}`);
  }
  return value as Record<string, unknown>;
}
