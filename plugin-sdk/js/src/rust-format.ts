// Rust's `{:?}` of a str and a char, so messages read exactly as the Rust SDK's.

function escape(c: string, quote: '"' | "'"): string {
  switch (c) {
    case '\t':
      return '\\t';
    case '\r':
      return '\\r';
    case '\n':
      return '\\n';
    case '\\':
      return '\\\\';
    case '\0':
      return '\\0';
    case quote:
      return `\\${quote}`;
  }
  // Rust escapes control and other non-printable characters as \u{hex}.
  if (/^[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cn}\p{Co}\p{Cs}]$/u.test(c)) {
    return `\\u{${c.codePointAt(0)!.toString(16)}}`;
  }
  return c;
}

export function rustDebugStr(s: string): string {
  return `"${[...s].map((c) => escape(c, '"')).join('')}"`;
}

export function rustDebugChar(c: string): string {
  return `'${escape(c, "'")}'`;
}
