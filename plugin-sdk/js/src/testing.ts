// orca-plugin/testing: test doubles for plugin logic run in plain Node (plugin-sdk/src/testing.rs).
import { CatalogueBase, compareTypes, matches, toQuery, type QueryInput } from './catalogue.js';
import { isPolicyError, type PolicyErrorKind } from './errors.js';
import { installHost, takeUnhostedLog } from './host.js';
import type { Architecture, InstanceType, Pod, Resources } from './types.js';

/** A fixed list of instance types, queried exactly like the host's catalogue. */
export class FixedCatalogue extends CatalogueBase {
  readonly types: InstanceType[];

  constructor(types: InstanceType[]) {
    super();
    this.types = types;
  }

  query(input: QueryInput): InstanceType[] {
    const query = toQuery(input);
    const found = this.types.filter((t) => matches(t, query)).sort(compareTypes);
    return query.limit > 0 ? found.slice(0, query.limit) : found;
  }
}

/** An instance type; the family is the name's part before the dot. */
export function instanceType(
  name: string,
  vcpus: number,
  memoryGib: number,
  gpus: number,
  architecture: Architecture,
  price: number | undefined,
  more: Partial<InstanceType> = {},
): InstanceType {
  return {
    name,
    family: name.split('.')[0]!,
    vcpus,
    memoryMib: BigInt(memoryGib) * 1024n,
    gpus,
    gpuModel: undefined,
    architecture,
    onDemandPrice: price,
    spotPrice: undefined,
    zones: [],
    ...more,
  };
}

/** What `pod()` takes: any field of a pod; `requests`/`limits` fields one by one. */
export type PodInput = Partial<Omit<Pod, 'requests' | 'limits'>> & {
  requests?: Partial<Resources>;
  limits?: Partial<Resources>;
};

function nothing(): Resources {
  return { cpuMillis: 0n, memoryBytes: 0n, ephemeralStorageBytes: 0n, gpus: 0 };
}

/** The pod `ns/p` (uid `u`) with no resources, labels or annotations, and `fields` set. */
export function pod(fields: PodInput = {}): Pod {
  const { requests, limits, ...rest } = fields;
  return {
    namespace: 'ns',
    name: 'p',
    uid: 'u',
    labels: [],
    annotations: [],
    nodeSelector: [],
    tolerations: [],
    priority: undefined,
    json: '{}',
    zones: [],
    ...rest,
    requests: { ...nothing(), ...requests },
    limits: { ...nothing(), ...limits },
  };
}

/** `pod()` with these annotations. */
export function podWithAnnotations(annotations: Array<[string, string]>): Pod {
  return pod({ annotations });
}

/**
 * Runs `call`, which must throw a PolicyError of `kind`; returns its message (the WIT value's
 * text, '' for `unsupported`), for assertions.
 */
export function expectPolicyError(kind: PolicyErrorKind, call: () => unknown): string {
  let result: unknown;
  try {
    result = call();
  } catch (error) {
    if (!isPolicyError(error)) throw error;
    if (error.kind !== kind) {
      throw new Error(`expected PolicyError ${kind}, got ${error.message}`);
    }
    const { payload } = error;
    if (payload.tag === 'unsupported') return '';
    if (payload.tag === 'invalid-annotation') return error.message;
    return payload.val;
  }
  throw new Error(`expected PolicyError ${kind}, got ${JSON.stringify(result, bigintJson)}`);
}

function bigintJson(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? `${value}n` : value;
}

/**
 * Installs a fake host for code that uses `hostCatalogue` or `log` directly: queries go to
 * `catalogue`, log lines to the returned array. Call the returned `uninstall` when done.
 */
export function installFakeHost(catalogue: FixedCatalogue): {
  logged: Array<{ level: string; message: string }>;
  uninstall: () => void;
} {
  const logged: Array<{ level: string; message: string }> = [];
  installHost({
    log: (level, message) => logged.push({ level, message }),
    queryInstanceTypes: (query) => catalogue.query(query),
  });
  return { logged, uninstall: () => installHost(undefined) };
}

/** The lines `log` wrote while no host was installed, oldest first; empties the list. */
export const takeLog = takeUnhostedLog;
