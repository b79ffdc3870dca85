// The sandbox's network of an address: IPv4 /24, IPv6 /64, IPv4-mapped IPv6 as IPv4, and
// anything that is not an address refused (so it cannot be a fresh "network" per request).
import { describe, expect, test } from "bun:test";
import { isLinkLocalOrUnspecified, networkOf } from "../../src/core/desk/network.ts";

describe("networkOf", () => {
  const cases: [string, string | null][] = [
    ["203.0.113.7", "203.0.113.0/24"],
    ["203.0.113.255", "203.0.113.0/24"],
    ["::ffff:203.0.113.9", "203.0.113.0/24"],
    ["::FFFF:cb00:7109", "203.0.113.0/24"],
    ["2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"],
    ["2001:DB8:1:2::9", "2001:db8:1:2::/64"],
    ["2001:db8:0001:0002:ffff::", "2001:db8:1:2::/64"],
    ["[2001:db8:1:2::1]", "2001:db8:1:2::/64"],
    ["fe80::1%eth0", "fe80:0:0:0::/64"],
    ["::1", "0:0:0:0::/64"],
    ["2001:db8::1.2.3.4", "2001:db8:0:0::/64"],
    ["1.2.3", null],
    ["01.2.3.4", null],
    ["256.1.1.1", null],
    ["1:2:3:4:5:6:7:8:9", null],
    ["1::2::3", null],
    ["12345::", null],
    ["", null],
    ["localhost", null],
  ];
  for (const [address, network] of cases) {
    test(`${JSON.stringify(address)} → ${network}`, () => {
      expect(networkOf(address)).toBe(network);
    });
  }
});

describe("link-local and unspecified upstream hosts", () => {
  const hostOf = (url: string) => new URL(url).hostname;
  test("the ranges and their edges, as URL hostnames", () => {
    const cases: [string, boolean][] = [
      ["http://169.254.0.0/", true],
      ["http://169.254.255.255/", true],
      ["http://169.253.255.255/", false],
      ["http://169.255.0.0/", false],
      ["http://0.0.0.0/", true],
      ["http://0.255.255.255/", true],
      ["http://1.0.0.0/", false],
      ["http://127.0.0.1/", false],
      ["http://10.1.2.3/", false],
      ["http://[::]/", true],
      ["http://[::1]/", false],
      ["http://[fe80::]/", true],
      ["http://[febf:ffff::1]/", true],
      ["http://[fec0::1]/", false],
      ["http://[fe7f::1]/", false],
      ["http://[::ffff:169.254.1.2]/", true],
      ["http://[::ffff:0.0.0.0]/", true],
      ["http://[::ffff:127.0.0.1]/", false],
      ["http://[2001:db8::1]/", false],
      ["http://2852039166/", true],
      ["http://0251.0376.0251.0376/", true],
      ["http://example.com/", false],
      ["http://169.254.example/", false],
    ];
    for (const [url, expected] of cases) expect([url, isLinkLocalOrUnspecified(hostOf(url))]).toEqual([url, expected]);
  });
});
