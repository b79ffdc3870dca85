// The one MCP tool, `request`: parse the arguments, mint the id, check every field with the
// shared core, and only then talk to the approver. A refused field never leaves this process.
import { isApprovalId, mintApprovalId } from "../../core/ids.ts";
import { holdsCardNumber, validateAccountAsk, validatePayAsk } from "../../core/schema/ask.ts";
import { parseRequestArguments } from "../../core/schema/request-tool.ts";
import type { ApproverClient } from "./approver-client.ts";
import { failureResult, successResult, type ToolResult } from "./definition.ts";

export async function callRequestTool(args: unknown, approver: ApproverClient, limits: { maxAmount: string }): Promise<ToolResult> {
  const parsed = parseRequestArguments(args, { holdsCardNumber });
  if (!parsed.ok) return failureResult(parsed.code);
  const request = parsed.request;

  if (request.verb === "status") {
    if (!isApprovalId(request.approval_id)) return failureResult("APPROVAL_ID_INVALID");
    const answer = await approver.status(request.approval_id);
    if (!answer.ok) return failureResult(answer.code);
    const { approval_id, state } = answer.value;
    return successResult("ref" in answer.value && answer.value.ref !== undefined ? { approval_id, state, ref: answer.value.ref } : { approval_id, state });
  }

  // The id is ours, from a CSPRNG; the agent never picks it.
  const input = { approval_id: mintApprovalId(), ...request.fields };
  const checked = request.verb === "pay" ? validatePayAsk(input, limits) : validateAccountAsk(input);
  if (!checked.ok) return failureResult(checked.code);
  const answer = await approver.create(checked.ask);
  if (!answer.ok) return failureResult(answer.code);
  const { approval_id, state, expires_at } = answer.value;
  return successResult({ approval_id, state, expires_at });
}
