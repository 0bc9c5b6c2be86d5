// Every helper `orca-plugin` exports, called with known inputs, each result compared with what
// it must be. plugin.test.ts runs these checks in Node; the SDK's end-to-end test builds this
// plugin into a component with `build` and runs them in orca, in the component's engine
// (tests/e2e/languages.rs). A helper the engine cannot parse fails the build; one it runs
// differently fails a check (issue 46: validateTag and Quantity passed in Node and broke the
// build). The expectations avoid what engines word differently (JSON.parse's messages, stacks).
import {
  CatalogueBase,
  HostCatalogue,
  INTERFACE_VERSION,
  MAX_KEY_LEN,
  MAX_TAGS,
  MAX_VALUE_LEN,
  PolicyError,
  Quantity,
  QuantityError,
  annotation,
  anyQuery,
  compareTypes,
  definePlugin,
  divCeil,
  exportPolicy,
  hostCatalogue,
  isPolicyError,
  label,
  log,
  matches,
  memoryMibCeil,
  nodeSelector,
  parseSettings,
  toQuery,
  validateTag,
  vcpusCeil,
  type InstanceQuery,
  type InstanceType,
  type Pod,
} from 'orca-plugin';

/** One call of a helper and what it must give. */
export interface Check {
  /** The export of `orca-plugin` it calls. */
  helper: string;
  what: string;
  run: () => unknown;
  expected: unknown;
}

/**
 * Exports no check calls, because a plugin must not: the component entry (src/component.ts)
 * calls them in every component `build` makes, so building this plugin exercises them.
 */
export const CALLED_BY_THE_COMPONENT_ENTRY = ['installHost'];

/** A thrown error as a value to compare: its class and its message (and kind, when it has one). */
function thrown(call: () => unknown): unknown {
  try {
    return { returned: call() };
  } catch (error) {
    if (isPolicyError(error)) return { threw: 'PolicyError', kind: error.kind, message: error.message };
    if (error instanceof QuantityError) return { threw: 'QuantityError', kind: error.kind, message: error.message };
    if (error instanceof Error) return { threw: error.name, message: error.message };
    return { threw: String(error) };
  }
}

/** A value as text for comparing and for messages: bigints as `12n`, undefined kept. */
export function show(value: unknown): string {
  if (value === undefined) return 'undefined';
  return JSON.stringify(value, (_key, v: unknown) =>
    typeof v === 'bigint' ? `${v}n` : v === undefined ? '<undefined>' : v,
  );
}

function instanceType(name: string, vcpus: number, memoryMib: bigint, price: number | undefined, more: Partial<InstanceType> = {}): InstanceType {
  return {
    name,
    family: name.split('.')[0]!,
    vcpus,
    memoryMib,
    gpus: 0,
    gpuModel: undefined,
    architecture: 'amd64',
    onDemandPrice: price,
    spotPrice: undefined,
    zones: [],
    ...more,
  };
}

const POD: Pod = {
  namespace: 'vision',
  name: 'train',
  uid: 'u-1',
  labels: [['team', 'vision']],
  annotations: [['orca.research/instance-type', 'm7i.large']],
  requests: { cpuMillis: 1500n, memoryBytes: (3n << 30n) + 1n, ephemeralStorageBytes: 0n, gpus: 0 },
  limits: { cpuMillis: 0n, memoryBytes: 0n, ephemeralStorageBytes: 0n, gpus: 0 },
  nodeSelector: [['kubernetes.io/arch', 'arm64']],
  tolerations: [],
  priority: undefined,
  json: '{}',
  zones: [],
};

const ALLOWED_PUNCTUATION = 'allowed are letters, digits, spaces and _ . : / = + - @';
const SUFFIXES = 'expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent like e3';

/** A catalogue of two fixed types, through CatalogueBase's `get`. */
class TwoTypes extends CatalogueBase {
  readonly types = [instanceType('c7i.large', 2, 4096n, 0.0893), instanceType('m7i.large', 2, 8192n, 0.1008)];

  query(input: Parameters<CatalogueBase['query']>[0]): InstanceType[] {
    const query = toQuery(input);
    const found = this.types.filter((t) => matches(t, query)).sort(compareTypes);
    return query.limit > 0 ? found.slice(0, query.limit) : found;
  }
}

/** The checks; the host's catalogue (orca's, or a fake one in Node) must know m7i.large. */
export function checks(): Check[] {
  const cheap = instanceType('c7i.large', 2, 4096n, 0.0893);
  const dear = instanceType('m7i.large', 2, 8192n, 0.1008, { zones: ['us-east-1a'] });
  const unpriced = instanceType('x1.large', 2, 8192n, undefined);
  const m7iQuery: InstanceQuery = { ...anyQuery(), families: ['m7i'], minVcpus: 2, limit: 2 };
  const inner = definePlugin({
    name: 'inner',
    version: '1.0.0',
    selectInstance: (pod) => {
      throw PolicyError.declined(`not ${pod.name}`);
    },
  });
  return [
    { helper: 'INTERFACE_VERSION', what: 'the interface', run: () => INTERFACE_VERSION, expected: '0.3.0' },
    { helper: 'MAX_TAGS', what: 'AWS limit', run: () => MAX_TAGS, expected: 50 },
    { helper: 'MAX_KEY_LEN', what: 'AWS limit', run: () => MAX_KEY_LEN, expected: 128 },
    { helper: 'MAX_VALUE_LEN', what: 'AWS limit', run: () => MAX_VALUE_LEN, expected: 256 },

    // validateTag: letters and digits of every script (the generated Unicode class), refusals
    // quoted as Rust's {:?} quotes them (the generated non-printable class).
    { helper: 'validateTag', what: 'letters and digits beyond ASCII', run: () => validateTag('Zürich', 'ß Ж 中 ٣ Ⅻ ½ 𝐀 𝟘 ⓐ'), expected: undefined },
    { helper: 'validateTag', what: 'a zero-width space', run: () => validateTag('k\u200b', 'v'), expected: `tag "k\\u{200b}" contains '\\u{200b}'; ${ALLOWED_PUNCTUATION}` },
    { helper: 'validateTag', what: 'a no-break space', run: () => validateTag('k', 'a\u00a0b'), expected: `tag "k" contains '\u00a0'; ${ALLOWED_PUNCTUATION}` },
    { helper: 'validateTag', what: 'an emoji', run: () => validateTag('k', '\u{1f600}'), expected: `tag "k" contains '\u{1f600}'; ${ALLOWED_PUNCTUATION}` },
    { helper: 'validateTag', what: 'the aws: prefix', run: () => validateTag('AWS:x', 'v'), expected: 'tag key "AWS:x" uses the reserved aws: prefix' },
    { helper: 'validateTag', what: 'a long key, in characters', run: () => validateTag('é'.repeat(129), 'v'), expected: `tag key "${'é'.repeat(129)}" is longer than 128 characters` },
    { helper: 'validateTag', what: 'an empty key', run: () => validateTag('', 'v'), expected: 'tag key is empty' },

    // Quantity: exact values, Unicode spaces trimmed, non-printables escaped in messages.
    { helper: 'Quantity', what: '1.5Gi in units', run: () => Quantity.parse('1.5Gi').toUnitsCeil(), expected: 1610612736n },
    { helper: 'Quantity', what: '250m in millis', run: () => Quantity.parse('250m').toMillisCeil(), expected: 250n },
    { helper: 'Quantity', what: '1n rounds up', run: () => Quantity.parse('1n').toMillisCeil(), expected: 1n },
    { helper: 'Quantity', what: 'as a number', run: () => Quantity.parse('1.5Gi').toNumber(), expected: 1610612736 },
    { helper: 'Quantity', what: 'equal values', run: () => Quantity.parse('1000m').equals(Quantity.parse('1')), expected: true },
    { helper: 'Quantity', what: 'exact form', run: () => `${Quantity.parse('1.25')} ${Quantity.parse('1.5Gi')}`, expected: '125e-2 15e-1*2^30' },
    { helper: 'Quantity', what: 'Unicode spaces trimmed', run: () => Quantity.parse('\u00a02Gi\u3000').toUnitsCeil(), expected: 2n << 30n },
    { helper: 'Quantity', what: 'an exa in millis, past 2^64', run: () => Quantity.parse('1E').toMillisCeil(), expected: 1000000000000000000000n },
    { helper: 'QuantityError', what: 'unknown suffix', run: () => thrown(() => Quantity.parse('4TB')), expected: { threw: 'QuantityError', kind: 'unknown-suffix', message: `quantity "4TB" has an unknown suffix; ${SUFFIXES}` } },
    { helper: 'QuantityError', what: 'a control character, escaped', run: () => thrown(() => Quantity.parse('\u00852')), expected: { threw: 'QuantityError', kind: 'no-digits', message: 'quantity "\\u{85}2" has no digits before its suffix' } },
    { helper: 'QuantityError', what: 'too large', run: () => thrown(() => Quantity.parse('1e40').toMillisCeil()), expected: { threw: 'QuantityError', kind: 'too-large', message: 'quantity "1e40" is too large' } },

    // Errors.
    { helper: 'PolicyError', what: 'declined', run: () => thrown(() => { throw PolicyError.declined('not mine'); }), expected: { threw: 'PolicyError', kind: 'declined', message: 'declined: not mine' } },
    { helper: 'PolicyError', what: 'no-match', run: () => PolicyError.noMatch('nothing fits').payload, expected: { tag: 'no-match', val: 'nothing fits' } },
    { helper: 'PolicyError', what: 'invalid-settings', run: () => PolicyError.invalidSettings('bad').message, expected: 'invalid-settings: bad' },
    { helper: 'PolicyError', what: 'invalid-annotation', run: () => PolicyError.invalidAnnotation('a', 'v', 'a number').message, expected: 'invalid-annotation: a="v": expected a number' },
    { helper: 'PolicyError', what: 'invalid-annotation from a record', run: () => PolicyError.invalidAnnotation({ annotation: 'a', value: 'v', expected: 'x' }).payload, expected: { tag: 'invalid-annotation', val: { annotation: 'a', value: 'v', expected: 'x' } } },
    { helper: 'PolicyError', what: 'failed', run: () => PolicyError.failed('broke').kind, expected: 'failed' },
    { helper: 'PolicyError', what: 'unsupported', run: () => PolicyError.unsupported().message, expected: 'unsupported' },
    { helper: 'isPolicyError', what: 'of a kind', run: () => [isPolicyError(PolicyError.declined('x'), 'declined'), isPolicyError(PolicyError.declined('x'), 'failed'), isPolicyError(new Error('x'))], expected: [true, false, false] },

    // Plugins and settings.
    { helper: 'parseSettings', what: 'empty is {}', run: () => parseSettings('p', '  '), expected: {} },
    { helper: 'parseSettings', what: 'an object', run: () => parseSettings('p', '{"teams": {"a": ["m7i.large"]}}'), expected: { teams: { a: ['m7i.large'] } } },
    { helper: 'parseSettings', what: 'not an object', run: () => thrown(() => parseSettings('p', '[1]')), expected: { threw: 'PolicyError', kind: 'invalid-settings', message: 'invalid-settings: p settings: expected a JSON object, got [1]' } },
    { helper: 'parseSettings', what: 'not JSON (the parser words its message)', run: () => { const e = thrown(() => parseSettings('p', 'not json')) as { kind?: string; message?: string }; return [e.kind, e.message?.startsWith('invalid-settings: p settings: ')]; }, expected: ['invalid-settings', true] },
    { helper: 'definePlugin', what: 'its info', run: () => inner.info(), expected: { name: 'inner', version: '1.0.0', hooks: ['select-instance'] } },
    { helper: 'definePlugin', what: 'a hook it does not implement', run: () => thrown(() => inner.buildTags(POD, '', { nodeName: 'n', clusterName: 'c', instanceType: 'm7i.large', market: 'spot' })), expected: { threw: 'PolicyError', kind: 'unsupported', message: 'unsupported' } },
    { helper: 'definePlugin', what: 'a name orca refuses', run: () => thrown(() => definePlugin({ name: 'has space', version: '1' })), expected: { threw: 'Error', message: 'plugin name "has space" must be 1 to 63 printable ASCII characters without spaces' } },
    { helper: 'exportPolicy', what: 'info through the export', run: () => exportPolicy(inner).info(), expected: inner.info() },
    { helper: 'exportPolicy', what: 'a PolicyError passes as itself', run: () => thrown(() => exportPolicy(inner).selectInstance(POD, '')), expected: { threw: 'PolicyError', kind: 'declined', message: 'declined: not train' } },

    // Pods.
    { helper: 'label', what: 'present and absent', run: () => [label(POD, 'team'), label(POD, 'nope')], expected: ['vision', undefined] },
    { helper: 'annotation', what: 'present', run: () => annotation(POD, 'orca.research/instance-type'), expected: 'm7i.large' },
    { helper: 'nodeSelector', what: 'present', run: () => nodeSelector(POD, 'kubernetes.io/arch'), expected: 'arm64' },
    { helper: 'divCeil', what: 'rounds up', run: () => [divCeil(7n, 2n), divCeil(6n, 2n), divCeil(0n, 3n)], expected: [4n, 3n, 0n] },
    { helper: 'vcpusCeil', what: '1500m is 2', run: () => vcpusCeil(POD.requests), expected: 2 },
    { helper: 'memoryMibCeil', what: '3 GiB and a byte', run: () => memoryMibCeil(POD.requests), expected: 3073n },

    // Catalogue helpers, then the host's catalogue itself.
    { helper: 'anyQuery', what: 'matches everything', run: () => anyQuery(), expected: { minVcpus: 0, minMemoryMib: 0n, minGpus: 0, architecture: undefined, families: [], excludeFamilies: [], names: [], limit: 0, zones: [] } },
    { helper: 'toQuery', what: 'numbers for u64s', run: () => toQuery({ minMemoryMib: 1024, names: ['m7i.large'] }), expected: { ...anyQuery(), minMemoryMib: 1024n, names: ['m7i.large'] } },
    { helper: 'matches', what: 'filters', run: () => [matches(dear, toQuery({ minMemoryMib: 8192 })), matches(cheap, toQuery({ minMemoryMib: 8192 })), matches(dear, toQuery({ zones: ['us-east-1b'] })), matches(cheap, toQuery({ zones: ['us-east-1b'] }))], expected: [true, false, false, true] },
    { helper: 'compareTypes', what: 'cheapest first, unknown prices last', run: () => [dear, unpriced, cheap].sort(compareTypes).map((t) => t.name), expected: ['c7i.large', 'm7i.large', 'x1.large'] },
    { helper: 'CatalogueBase', what: 'get through query', run: () => [new TwoTypes().get('m7i.large')?.memoryMib, new TwoTypes().get('z9.none')], expected: [8192n, undefined] },
    { helper: 'hostCatalogue', what: 'a type by name', run: () => { const t = hostCatalogue.get('m7i.large'); return t && [t.name, t.family, t.vcpus, t.memoryMib, t.architecture]; }, expected: ['m7i.large', 'm7i', 2, 8192n, 'amd64'] },
    { helper: 'HostCatalogue', what: 'a query, in its order', run: () => { const found = new HostCatalogue().query(m7iQuery); return [found.length, found.every((t) => matches(t, m7iQuery)), [...found].sort(compareTypes).map((t) => t.name).join() === found.map((t) => t.name).join()]; }, expected: [2, true, true] },
    { helper: 'log', what: 'a line to the host', run: () => log('debug', 'every-helper-js: the log helper writes this line'), expected: undefined },
  ];
}

/** The checks whose result is not the expected one, as `helper (what): expected X, got Y`. */
export function failures(list: Check[]): string[] {
  const failed: string[] = [];
  for (const check of list) {
    let actual: string;
    try {
      actual = show(check.run());
    } catch (error) {
      actual = `an exception: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
    }
    const expected = show(check.expected);
    if (actual !== expected) failed.push(`${check.helper} (${check.what}): expected ${expected}, got ${actual}`);
  }
  return failed;
}
