// Kubernetes resource quantities (`500m`, `2`, `1.5Gi`, `4Ti`, `1e3`) parsed exactly, as
// plugin-sdk/src/quantity.rs: the value is `mantissa × 10^exponent10 × 2^exponent2` with a
// bigint mantissa bounded like Rust's i128, and conversions round *up* as Kubernetes does when
// it compares requests with capacity: `1n` CPU needs a whole millicore, never zero.
import { rustDebugStr } from './rust-format.js';

const I128_MAX = (1n << 127n) - 1n;
const I128_MIN = -(1n << 127n);

export type QuantityErrorKind = 'empty' | 'no-digits' | 'unknown-suffix' | 'too-large';

/** Why a string is not a Kubernetes quantity; `message` is the Rust SDK's, word for word. */
export class QuantityError extends Error {
  readonly kind: QuantityErrorKind;
  /** The text that was parsed ('' for `empty`). */
  readonly input: string;

  constructor(kind: QuantityErrorKind, input: string) {
    super(message(kind, input));
    this.name = 'QuantityError';
    this.kind = kind;
    this.input = input;
  }
}

function message(kind: QuantityErrorKind, input: string): string {
  const q = rustDebugStr(input);
  switch (kind) {
    case 'empty':
      return 'quantity is empty';
    case 'no-digits':
      return `quantity ${q} has no digits before its suffix`;
    case 'unknown-suffix':
      return `quantity ${q} has an unknown suffix; expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent like e3`;
    case 'too-large':
      return `quantity ${q} is too large`;
  }
}

function fits(value: bigint): boolean {
  return value >= I128_MIN && value <= I128_MAX;
}

const SUFFIXES: Record<string, [number, number]> = {
  '': [0, 0],
  n: [-9, 0],
  u: [-6, 0],
  m: [-3, 0],
  k: [3, 0],
  M: [6, 0],
  G: [9, 0],
  T: [12, 0],
  P: [15, 0],
  E: [18, 0],
  Ki: [0, 10],
  Mi: [0, 20],
  Gi: [0, 30],
  Ti: [0, 40],
  Pi: [0, 50],
  Ei: [0, 60],
};

/** A parsed Kubernetes quantity. */
export class Quantity {
  private constructor(
    readonly mantissa: bigint,
    readonly exponent10: number,
    readonly exponent2: number,
  ) {}

  /**
   * Parses `text` (surrounding whitespace ignored).
   * @throws {QuantityError} for an empty, digit-less, unknown-suffix or too large quantity.
   */
  static parse(text: string): Quantity {
    const whole = text.trim();
    if (whole.length === 0) throw new QuantityError('empty', '');
    const numberEnd = whole.search(/[^0-9.+-]/);
    const number = numberEnd < 0 ? whole : whole.slice(0, numberEnd);
    const suffix = numberEnd < 0 ? '' : whole.slice(numberEnd);
    let [mantissa, exponent10] = parseDecimal(number, whole);
    const [suffix10, exponent2] = parseSuffix(suffix, whole);
    exponent10 += suffix10;
    // Normalise trailing zeros away so equal values compare equal.
    while (mantissa !== 0n && mantissa % 10n === 0n) {
      mantissa /= 10n;
      exponent10 += 1;
    }
    return new Quantity(mantissa, exponent10, exponent2);
  }

  /** The value in thousandths of a unit, rounded up (CPU `250m` → 250n, `2` → 2000n). */
  toMillisCeil(): bigint {
    return this.scaledCeil(3);
  }

  /** The value in whole units, rounded up (memory `1Ki` → 1024n, CPU `1500m` → 2n). */
  toUnitsCeil(): bigint {
    return this.scaledCeil(0);
  }

  /** The value as a float, for display and ratios where exactness does not matter. */
  toNumber(): number {
    return Number(this.mantissa) * 10 ** this.exponent10 * 2 ** this.exponent2;
  }

  equals(other: Quantity): boolean {
    return (
      this.mantissa === other.mantissa &&
      this.exponent10 === other.exponent10 &&
      this.exponent2 === other.exponent2
    );
  }

  /** `125e-2`, `3e0*2^29`: the exact form, as the Rust SDK prints it. */
  toString(): string {
    const base = `${this.mantissa}e${this.exponent10}`;
    return this.exponent2 !== 0 ? `${base}*2^${this.exponent2}` : base;
  }

  /** `value × 10^extra10`, rounded toward +∞; throws `too-large` past i128 as Rust does. */
  private scaledCeil(extra10: number): bigint {
    const tooLarge = () => new QuantityError('too-large', this.toString());
    const numerator = this.mantissa * (1n << BigInt(this.exponent2));
    if (!fits(1n << BigInt(this.exponent2)) || !fits(numerator)) throw tooLarge();
    const exponent = this.exponent10 + extra10;
    if (exponent >= 0) {
      const scale = 10n ** BigInt(exponent);
      if (!fits(scale)) throw tooLarge();
      const result = numerator * scale;
      if (!fits(result)) throw tooLarge();
      return result;
    }
    const divisor = 10n ** BigInt(-exponent);
    // A divisor past i128 means the value is a tiny positive fraction (or zero).
    if (!fits(divisor)) return numerator > 0n ? 1n : 0n;
    const quotient = numerator / divisor;
    return numerator % divisor > 0n ? quotient + 1n : quotient;
  }
}

/** `"-1.25"` → [-125n, -2]. */
function parseDecimal(number: string, whole: string): [bigint, number] {
  let negative = false;
  let unsigned = number;
  if (number.startsWith('-')) {
    negative = true;
    unsigned = number.slice(1);
  } else if (number.startsWith('+')) {
    unsigned = number.slice(1);
  }
  const dot = unsigned.indexOf('.');
  const integer = dot < 0 ? unsigned : unsigned.slice(0, dot);
  const fraction = dot < 0 ? '' : unsigned.slice(dot + 1);
  const digitsOnly = (s: string) => /^[0-9]*$/.test(s);
  if ((integer === '' && fraction === '') || !digitsOnly(integer) || !digitsOnly(fraction)) {
    throw new QuantityError('no-digits', whole);
  }
  const mantissa = BigInt(integer + fraction);
  if (!fits(mantissa)) throw new QuantityError('too-large', whole);
  return [negative ? -mantissa : mantissa, -fraction.length];
}

/** Suffix → [power of ten, power of two]. */
function parseSuffix(suffix: string, whole: string): [number, number] {
  const known = SUFFIXES[suffix];
  if (known !== undefined && Object.hasOwn(SUFFIXES, suffix)) return known;
  // An exponent like e3, E-2 (Rust's i32 parse: optional sign, then digits).
  const match = /^[eE]([+-]?[0-9]+)$/.exec(suffix);
  const exponent = match ? Number(match[1]) : NaN;
  if (!Number.isFinite(exponent) || Math.abs(exponent) > 40) {
    throw new QuantityError('unknown-suffix', whole);
  }
  return [exponent, 0];
}
