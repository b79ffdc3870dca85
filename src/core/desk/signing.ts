// The receipt-signing key the desk signs with now, its rotation, and the key set it publishes.
// A new key is kept (SigningKeyStore) and published in the ledger before anything is signed
// with it; a retired key stays in the set, so every receipt ever issued still verifies.
import { signOrgRecord } from "../finance/org-records.ts";
import { type StatementEnvelope, type StatementFields, signStatement } from "../finance/statement.ts";
import { type Envelope, generateSigningKey, type Jwks, jwksOf, loadSigner, type ReceiptSigner, sha256Hex } from "../receipt/index.ts";
import type { Clock, OrgRecordMaker, ReceiptMaker, RecordStore, SigningKeyStore } from "./ports.ts";
import { receiptMakerFor } from "./receipt-maker.ts";

export class Signing {
  constructor(
    private signer: ReceiptSigner,
    private readonly records: RecordStore,
    private readonly store: SigningKeyStore,
    private readonly now: Clock,
  ) {}

  get current(): ReceiptSigner {
    return this.signer;
  }

  /** Publishes the current key (at start-up); any other key is retired. */
  publish(): Promise<void> {
    return this.records.addSigningKey(this.signer.kid, this.signer.publicJwk(), this.now());
  }

  /**
   * A receipt maker bound to the current signer; `last` keeps the envelope it signed so the
   * caller can answer with it without parsing the stored text back.
   */
  receiptMaker(): { make: ReceiptMaker; last: () => Envelope | null } {
    let signed: Envelope | null = null;
    const make = receiptMakerFor(
      this.signer,
      (envelope) => {
        signed = envelope;
      },
      this.now,
    );
    return { make, last: () => signed };
  }

  /** Signs an org's budget records with the current key (the ledger calls it in the record's transaction). */
  recordMaker(): OrgRecordMaker {
    const signer = this.signer;
    return (fields) => {
      const envelope = signOrgRecord(signer, fields);
      return { record: envelope.record, sha256: sha256Hex(Buffer.from(envelope.payload, "base64url")), envelope: JSON.stringify(envelope) };
    };
  }

  /** Signs a statement's figures with the current key. */
  statement(fields: StatementFields): StatementEnvelope {
    return signStatement(this.signer, fields);
  }

  /** Switches to a new key; the old one stays in the key set as retired. */
  async rotate(): Promise<{ kid: string; retiredKid: string }> {
    const retiredKid = this.signer.kid;
    const fresh = generateSigningKey();
    const signer = loadSigner(fresh.privatePem);
    this.store(fresh.privatePem);
    await this.records.addSigningKey(signer.kid, signer.publicJwk(), this.now());
    this.signer = signer;
    return { kid: signer.kid, retiredKid };
  }

  async jwks(): Promise<Jwks> {
    const retired = (await this.records.signingKeys()).filter((k) => k.kid !== this.signer.kid).map((k) => k.publicJwk);
    return jwksOf(this.signer.publicJwk(), retired);
  }
}
