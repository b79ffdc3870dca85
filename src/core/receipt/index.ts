// Desk receipts: canonical JSON, hashing, signing and offline verification.
export { CanonicalJsonError, type CanonicalJsonProblem, canonicalJson, MAX_DEPTH } from "./canonical.ts";
export { hashJson, sha256Hex } from "./hash.ts";
export { bindResult, MCP_RECEIPT_META_KEY, paramsSha256, resultForHashing, resultSha256, withoutUpstreamReceipt, withReceipt } from "./result.ts";
export {
  chainLinkAfter,
  generateSigningKey,
  type Jwks,
  jwkThumbprint,
  jwksOf,
  loadSigner,
  loadSigningKey,
  type ReceiptJwk,
  ReceiptInvalidError,
  ReceiptKeyError,
  type ReceiptSigner,
  type SigningKey,
} from "./sign.ts";
export {
  type ApprovalEnvelope,
  type ApprovalOutcome,
  APPROVAL_OUTCOMES,
  APPROVAL_RECEIPT_VERSION,
  canonicalReceipt,
  type Envelope,
  OUTCOMES,
  type Outcome,
  RECEIPT_FIELDS,
  RECEIPT_VERSION,
  type Receipt,
  type ReceiptFields,
  receiptProblem,
} from "./types.ts";
export {
  type ChainFailure,
  ChainVerifier,
  type Check,
  type CheckName,
  describeCheck,
  type OpenedEnvelope,
  openEnvelope,
  openEnvelopeAsync,
  openExportLine,
  openStored,
  printable,
  ReceiptKeys,
  readShape,
  type Shape,
  SHAPES_READ,
  verifyChain,
  verifyEnvelope,
  verifyResponse,
} from "./verify.ts";
export { envelopeText, readableReceipt, type SignedReceipt, signedOf } from "./stored.ts";
