// A decision signer for tests of the ask ledger: a fresh Ed25519 key per run, as the approver
// makes one on first start, and the recap hash tests decide on when the recap itself is not
// what they test.
import { decisionSigner } from "../../src/core/decision/sign.ts";
import { generateSigningKey, loadSigningKey } from "../../src/core/receipt/sign.ts";
import { sha256Hex } from "../../src/core/receipt/hash.ts";

export const testSigningKey = () => loadSigningKey(generateSigningKey().privatePem, "the test decision key");

export const TEST_KEY = testSigningKey();
export const TEST_SIGNER = decisionSigner(TEST_KEY);

/** The SHA-256 of a recap text the console would have written. */
export const RECAP = sha256Hex("[ask K7Q2M4XZ3A] PAY 19.00 EUR\n");
