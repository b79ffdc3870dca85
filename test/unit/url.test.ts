import { describe, expect, test } from "bun:test";
import { checkAskUrl, MAX_URL_LENGTH, siteOf, type UrlCheck } from "../../src/core/schema/url.ts";

const INVALID: UrlCheck = { ok: false, code: "URL_INVALID" };

describe("checkAskUrl", () => {
  test("a plain https URL: href and site as the parser gives them", () => {
    expect(checkAskUrl("https://shop.example/checkout/123")).toEqual({
      ok: true,
      href: "https://shop.example/checkout/123",
      site: "shop.example",
    });
    expect(checkAskUrl("https://provider.example")).toEqual({ ok: true, href: "https://provider.example/", site: "provider.example" });
    expect(checkAskUrl("HTTPS://Shop.EXAMPLE:443/a/../b?q=1#f")).toEqual({
      ok: true,
      href: "https://shop.example/b?q=1#f",
      site: "shop.example",
    });
  });

  test("a look-alike host gives a punycode site", () => {
    // "shop.exаmple" with a Cyrillic а (U+0430).
    const r = checkAskUrl("https://shop.ex\u0430mple/checkout");
    expect(r).toEqual({ ok: true, href: "https://shop.xn--exmple-4nf/checkout", site: "shop.xn--exmple-4nf" });
    expect(checkAskUrl("https://ｓｈｏｐ.example/")).toEqual({ ok: true, href: "https://shop.example/", site: "shop.example" });
    expect(checkAskUrl("https://bücher.example/").ok && siteOf("https://xn--bcher-kva.example/")).toBe("xn--bcher-kva.example");
  });

  test("percent-encoding and IDN: the stored href is the resolved one", () => {
    expect(checkAskUrl("https://bücher.example/straße?q=ä b")).toEqual({
      ok: true,
      href: "https://xn--bcher-kva.example/stra%C3%9Fe?q=%C3%A4%20b",
      site: "xn--bcher-kva.example",
    });
    // A percent-encoded host is decoded by the parser.
    expect(checkAskUrl("https://sh%6Fp.example/")).toEqual({ ok: true, href: "https://shop.example/", site: "shop.example" });
    // Tabs and newlines inside are dropped by the parser; what is stored is what is shown.
    // The parser's fix-ups (missing or extra slashes) are part of the href, so shown as passed on.
    expect(checkAskUrl("https:shop.example")).toEqual({ ok: true, href: "https://shop.example/", site: "shop.example" });
    expect(checkAskUrl("https:///shop.example")).toEqual({ ok: true, href: "https://shop.example/", site: "shop.example" });
    expect(checkAskUrl("https://shop.example/ch\teck\nout")).toEqual({ ok: true, href: "https://shop.example/checkout", site: "shop.example" });
  });

  test("credentials are refused", () => {
    for (const raw of ["https://user:pass@shop.example/", "https://user@shop.example/", "https://:pass@shop.example/", "https://shop.example@evil.example/"]) {
      expect(checkAskUrl(raw)).toEqual(INVALID);
    }
  });

  test("other schemes and relative or broken URLs are refused", () => {
    for (const raw of [
      "http://shop.example/",
      "ftp://shop.example/",
      "javascript:alert(1)",
      "data:text/html,hi",
      "file:///etc/passwd",
      "wss://shop.example/",
      "//shop.example/checkout",
      "/checkout",
      "shop.example",
      "https://",
      "https://exa mple.com/",
      "",
    ]) {
      expect({ raw, r: checkAskUrl(raw) }).toEqual({ raw, r: INVALID });
    }
  });

  test("non-strings are refused", () => {
    for (const raw of [undefined, null, 1, {}, ["https://shop.example/"], new URL("https://shop.example/")]) {
      expect(checkAskUrl(raw)).toEqual(INVALID);
    }
  });

  test("length: 2048 characters accepted, 2049 refused; the resolved href counts too", () => {
    const prefix = "https://shop.example/";
    const at = (n: number) => prefix + "a".repeat(n - prefix.length);
    expect(at(MAX_URL_LENGTH)).toHaveLength(2048);
    expect(checkAskUrl(at(2048))).toMatchObject({ ok: true, href: at(2048) });
    expect(checkAskUrl(at(2049))).toEqual(INVALID);
    // 700 spaces are 700 characters raw, 2100 once percent-encoded.
    const spaced = `${prefix}${" ".repeat(700)}x`;
    expect(spaced.length).toBeLessThan(2048);
    expect(checkAskUrl(spaced)).toEqual(INVALID);
    // Raw length counts code points: 2048 emoji in the path are 2048 characters, each 12 once encoded.
    expect(checkAskUrl(prefix + "😀".repeat(2048))).toEqual(INVALID);
    expect(checkAskUrl(`${prefix}${"😀".repeat(100)}`)).toMatchObject({ ok: true });
  });
});
