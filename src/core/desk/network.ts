// IP addresses read strictly. The network an address belongs to, for the sandbox's per-network
// limit: IPv4 /24 and IPv6 /64 (what one home, office or cloud host usually holds); an
// IPv4-mapped IPv6 address counts as the IPv4 address it carries, so a dual-stack socket cannot
// double a network's allowance. And the addresses an upstream may not have unless the operator
// names them (link-local, unspecified).

/** `"203.0.113.0/24"` or `"2001:db8:1:2::/64"`, or null when `address` is no IP address. */
export function networkOf(address: string): string | null {
  const text = address.trim().replace(/^\[(.*)\]$/, "$1");
  const v4 = ipv4(text);
  if (v4 !== null) return `${v4[0]}.${v4[1]}.${v4[2]}.0/24`;
  const v6 = ipv6(text.replace(/%[^%]*$/, ""));
  if (v6 === null) return null;
  // ::ffff:a.b.c.d: the IPv4 address inside.
  if (v6.slice(0, 5).every((h) => h === 0) && v6[5] === 0xffff) {
    return `${v6[6]! >> 8}.${v6[6]! & 0xff}.${v6[7]! >> 8}.0/24`;
  }
  return `${v6
    .slice(0, 4)
    .map((h) => h.toString(16))
    .join(":")}::/64`;
}

function ipv4(text: string): number[] | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  const out: number[] = [];
  for (const p of parts) {
    // Decimal only, no leading zeros: "010" would be octal to some parsers.
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p) || Number(p) > 255) return null;
    out.push(Number(p));
  }
  return out;
}

/** Eight 16-bit groups, or null. Accepts `::` compression and a trailing dotted IPv4. */
function ipv6(text: string): number[] | null {
  if (!/^[0-9a-fA-F:.]{2,45}$/.test(text)) return null;
  let groups: number[] = [];
  let tail = text;
  const dotted = /:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const v4 = ipv4(dotted[1]!);
    if (v4 === null) return null;
    tail = `${text.slice(0, dotted.index + 1)}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  }
  const halves = tail.split("::");
  if (halves.length > 2) return null;
  const read = (s: string): number[] | null => {
    if (s === "") return [];
    const out: number[] = [];
    for (const g of s.split(":")) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
      out.push(Number.parseInt(g, 16));
    }
    return out;
  };
  const head = read(halves[0]!);
  if (head === null) return null;
  if (halves.length === 1) {
    if (head.length !== 8) return null;
    groups = head;
  } else {
    const rest = read(halves[1]!);
    if (rest === null || head.length + rest.length > 7) return null;
    groups = [...head, ...new Array<number>(8 - head.length - rest.length).fill(0), ...rest];
  }
  return groups;
}

/**
 * Whether a URL's hostname (as the WHATWG parser writes it, so every IPv4 spelling is already
 * dotted decimal and IPv6 is bracketed) is a link-local or unspecified address: 169.254.0.0/16
 * (where clouds serve instance metadata and credentials), 0.0.0.0/8, fe80::/10 and ::, also as
 * an IPv4-mapped IPv6 address (::ffff:169.254.169.254). Names are not resolved here.
 */
export function isLinkLocalOrUnspecified(hostname: string): boolean {
  const text = hostname.replace(/^\[(.*)\]$/, "$1");
  const v4 = ipv4(text);
  if (v4 !== null) return v4[0] === 0 || (v4[0] === 169 && v4[1] === 254);
  const v6 = ipv6(text);
  if (v6 === null) return false;
  if (v6.slice(0, 5).every((h) => h === 0) && v6[5] === 0xffff) {
    return isLinkLocalOrUnspecified(`${v6[6]! >> 8}.${v6[6]! & 0xff}.${v6[7]! >> 8}.${v6[7]! & 0xff}`);
  }
  return v6.every((h) => h === 0) || (v6[0]! & 0xffc0) === 0xfe80;
}
