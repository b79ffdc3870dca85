// The alert retry schedule, Retry-After and the --alert-webhook URL rule.
import { describe, expect, test } from "bun:test";
import { JITTER, MAX_RETRY_AFTER_MS, nextAttemptAt, parseAlertWebhookUrl, RETRY_DELAYS_MS, retryAfterMs } from "../../src/core/finance/alert-outbox.ts";

const T = 1_795_000_000_000;

describe("the retry schedule", () => {
  test("Standard Webhooks' schedule: 9 waits, about 3 days, then give up at the 10th failure", () => {
    expect(RETRY_DELAYS_MS.map((ms) => ms / 1000)).toEqual([5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400]);
    expect(RETRY_DELAYS_MS.reduce((a, b) => a + b, 0)).toBe((75 * 3600 + 35 * 60 + 5) * 1000);
    expect(nextAttemptAt(10, T, () => 0.5)).toBeNull();
    expect(nextAttemptAt(9, T, () => 0.5)).toBe(T + 86_400_000);
  });

  test("jitter scales each wait into [0.8, 1.2)", () => {
    for (let failures = 1; failures <= 9; failures++) {
      const base = RETRY_DELAYS_MS[failures - 1]!;
      expect(nextAttemptAt(failures, T, () => 0)).toBe(T + Math.round(base * (1 - JITTER)));
      expect(nextAttemptAt(failures, T, () => 0.999999)).toBeLessThanOrEqual(T + base * (1 + JITTER));
      expect(nextAttemptAt(failures, T, () => 0.5)).toBe(T + base);
    }
  });

  test("Retry-After lengthens a wait up to 24 h and never shortens it", () => {
    expect(nextAttemptAt(1, T, () => 0.5, RETRY_DELAYS_MS, 120_000)).toBe(T + 120_000);
    expect(nextAttemptAt(4, T, () => 0.5, RETRY_DELAYS_MS, 1_000)).toBe(T + RETRY_DELAYS_MS[3]!);
    expect(nextAttemptAt(1, T, () => 0.5, RETRY_DELAYS_MS, 10 * MAX_RETRY_AFTER_MS)).toBe(T + MAX_RETRY_AFTER_MS);
  });

  test("Retry-After reads delay-seconds and HTTP dates, nothing else", () => {
    expect(retryAfterMs("120", T)).toBe(120_000);
    expect(retryAfterMs(" 0 ", T)).toBe(0);
    expect(retryAfterMs(new Date(T + 90_000).toUTCString(), T)).toBe(90_000);
    expect(retryAfterMs(new Date(T - 90_000).toUTCString(), T)).toBe(0);
    for (const bad of [null, "", "-5", "1.5", "soon", "12345678901"]) expect(retryAfterMs(bad, T)).toBeNull();
  });
});

describe("--alert-webhook", () => {
  test("http or https, no credentials, at most 2048 characters", () => {
    expect(parseAlertWebhookUrl("https://hooks.example.com/ask-only")?.href).toBe("https://hooks.example.com/ask-only");
    expect(parseAlertWebhookUrl("http://127.0.0.1:9000/alerts")?.port).toBe("9000");
    for (const bad of [
      "ftp://x.example/",
      "https://user:pw@hooks.example.com/",
      "https://token@hooks.example.com/",
      "not a url",
      "/relative",
      `https://x.example/${"a".repeat(2048)}`,
      "file:///etc/passwd",
    ]) {
      expect(parseAlertWebhookUrl(bad)).toBeNull();
    }
  });
});
