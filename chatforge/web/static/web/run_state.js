// The state of one assistant reply, built either from a stored message or
// from a run's events. Pure functions, no DOM: the renderer draws whatever
// this holds, so a page reload, a reconnect or a snapshot all end in the
// same picture.
//
// state = {
//   runId, lastSeq, status: queued|running|completed|failed|cancelled,
//   error, notice, finishReason, maxIterationsReached,
//   messageId, endedAt,               // the stored answer and when the run ended
//   model, assistant,                 // the model that answers, the assistant profile's name or ""
//   iteration,                        // the model turn streaming now
//   rounds: [{iteration, text, reasoning,
//             tools: [{id, name, arguments, status, output, ms, attempts, lastError,
//                      approval: null | {expiresAt, decision, reason, by, expired},
//                      files: [{id, name, content_type, kind, size}],   // files the tool returned
//                      cached}]}],   // true: the result came from the tool result cache
// }
//
// A tool's status is the ledger's (running, success, error, timeout,
// cancelled, awaiting_approval), except that a call the user denied is
// "denied" and one whose approval lapsed "expired": the server records
// both as error results (what the model reads), but nothing failed.

export const TERMINAL = new Set(["completed", "failed", "cancelled"]);

export function newRunState(runId, status = "queued") {
  return {
    runId, lastSeq: 0, status, error: "", notice: "", finishReason: "",
    maxIterationsReached: false, messageId: "", endedAt: "", iteration: 0, rounds: [],
    model: "", assistant: "",
  };
}

function roundFor(state, iteration) {
  let round = state.rounds.find((r) => r.iteration === iteration);
  if (!round) {
    round = { iteration, text: "", reasoning: "", tools: [] };
    state.rounds.push(round);
    state.rounds.sort((a, b) => a.iteration - b.iteration);
  }
  return round;
}

function findTool(state, id) {
  for (const round of state.rounds) {
    const tool = round.tools.find((t) => t.id === id);
    if (tool) return tool;
  }
  return null;
}

function upsertTool(round, call) {
  let tool = round.tools.find((t) => t.id === call.id);
  if (!tool) {
    tool = {
      id: call.id, name: call.name, arguments: "", status: "running", output: "", ms: null, attempts: 1,
      lastError: "", approval: null, files: [], cached: false,
    };
    round.tools.push(tool);
  }
  tool.name = call.name;
  tool.arguments = call.arguments || "";
  return tool;
}

// The status a result shows: a denied (or lapsed) call's error result is
// the decision, not a failure of the tool.
function resultStatus(tool, status) {
  const approval = tool.approval;
  if (status !== "error" || !approval || approval.decision !== "deny") return status;
  return approval.expired ? "expired" : "denied";
}

// Decisions on calls that asked for approval, by tool call id
// ({decision, reason, by, expired}): the page's stored messages carry them
// (chatforge/web/pages.py), and a snapshot keeps those the events told.
function applyApprovals(state, approvals) {
  for (const [id, approval] of Object.entries(approvals || {})) {
    const tool = findTool(state, id);
    if (!tool) continue;
    tool.approval = { ...(tool.approval || {}), ...approval };
    tool.status = resultStatus(tool, tool.status);
  }
}

function decidedApprovals(state) {
  const decided = {};
  for (const round of state.rounds) {
    for (const tool of round.tools) if (tool.approval && tool.approval.decision) decided[tool.id] = tool.approval;
  }
  return decided;
}

// The tool rounds of a stored message or a snapshot, in the API's shape:
// [{iteration, assistant_response, tool_calls: [{id, name, arguments}],
//   results: [{tool_call_id, output, status, execution_time_ms, files?, cached?}]}]
function applyRounds(state, rounds) {
  for (const stored of rounds || []) {
    const round = roundFor(state, stored.iteration ?? 0);
    round.text = stored.assistant_response || "";
    for (const call of stored.tool_calls || []) upsertTool(round, call);
    for (const result of stored.results || []) {
      const tool = findTool(state, result.tool_call_id);
      if (!tool) continue;
      tool.status = result.status === "pending" ? "running" : result.status;
      tool.output = result.output || "";
      tool.ms = result.execution_time_ms ?? null;
      tool.files = result.files || [];
      tool.cached = result.cached === true;
    }
  }
}

// Calls waiting for the user's decision (from a snapshot; events say it one by one).
function applyPendingApprovals(state, pending) {
  for (const request of pending || []) {
    const tool = findTool(state, request.tool_call_id);
    if (tool) { tool.status = "awaiting_approval"; tool.approval = { expiresAt: request.expires_at }; }
  }
}

function settleUnfinishedTools(state) {
  for (const round of state.rounds) {
    for (const tool of round.tools) {
      if (tool.status === "running" || tool.status === "awaiting_approval") {
        tool.status = state.status === "cancelled" ? "cancelled" : "error";
      }
    }
  }
}

// A stored assistant message (GET /api/conversations/{id}/messages/).
export function stateFromMessage(message) {
  const status = { final: "completed", error: "failed", cancelled: "cancelled" }[message.status] || "completed";
  const state = newRunState(message.run, status);
  applyRounds(state, message.tool_rounds);
  applyApprovals(state, message.approvals);
  state.messageId = message.id || "";
  state.endedAt = message.created_at || "";
  state.model = message.model || "";
  state.assistant = message.assistant || "";
  const last = state.rounds.length ? state.rounds[state.rounds.length - 1].iteration : -1;
  if (message.content) roundFor(state, last + 1).text = message.content;
  state.finishReason = message.finish_reason || "";
  settleUnfinishedTools(state);
  return state;
}

export const RECONNECTING = "Reconnecting the run…";

// Applies one event; returns false for an event already applied (a replay
// after a reconnect never duplicates text).
export function applyEvent(state, event) {
  if (typeof event.seq === "number") {
    if (event.seq <= state.lastSeq) return false;
    state.lastSeq = event.seq;
  }
  const d = event.data || {};
  // "Reconnecting the run…" lasts until the run's next event of any other kind.
  if (state.notice === RECONNECTING && event.type !== "run.reconnecting") state.notice = "";
  switch (event.type) {
    case "run.reconnecting":
      // The worker running a step was lost; the step is being sent to another
      // (docs/events.md). Its new delivery announces itself as usual.
      state.notice = RECONNECTING;
      break;
    case "run.started":
      state.status = "running";
      break;
    case "llm.started": {
      // Sent again when a turn is re-run after a worker crash: its earlier
      // partial text is dropped.
      state.status = "running";
      state.iteration = d.iteration;
      const round = roundFor(state, d.iteration);
      round.text = "";
      round.reasoning = "";
      state.notice = "";
      break;
    }
    case "llm.retry": {
      const round = roundFor(state, d.iteration);
      if (d.discard_text) { round.text = ""; round.reasoning = ""; }
      state.notice = `The model call failed (${d.error}); trying again (attempt ${d.attempt}).`;
      break;
    }
    case "content.delta":
      roundFor(state, state.iteration).text += d.text || "";
      state.notice = "";
      break;
    case "reasoning.delta":
      roundFor(state, state.iteration).reasoning += d.text || "";
      break;
    case "tool_call":
      upsertTool(roundFor(state, d.iteration ?? state.iteration), d);
      break;
    case "tool.retry": {
      const tool = findTool(state, d.tool_call_id);
      if (tool) { tool.attempts = d.attempt; tool.lastError = d.error || ""; }
      break;
    }
    case "approval.required": {
      const tool = findTool(state, d.tool_call_id);
      if (tool && tool.status !== "success" && tool.status !== "error") {
        tool.status = "awaiting_approval";
        tool.approval = { expiresAt: d.expires_at };
      }
      break;
    }
    case "approval.decided": {
      const tool = findTool(state, d.tool_call_id);
      if (tool) {
        tool.approval = { ...(tool.approval || {}), decision: d.decision, reason: d.reason || "", by: d.by,
          expired: Boolean(d.expired) };
        // Approved: it runs now. Denied: its (error) result follows, and says so.
        if (tool.status === "awaiting_approval") tool.status = d.decision === "deny" ? resultStatus(tool, "error") : "running";
      }
      break;
    }
    case "tool_output": {
      const tool = findTool(state, d.tool_call_id);
      if (tool) {
        tool.status = resultStatus(tool, d.status);
        tool.output = d.output || "";
        tool.ms = d.execution_time_ms ?? null;
        tool.files = d.files || [];
        // Served from the tool result cache: the tool did not run again.
        tool.cached = d.cached === true;
      }
      break;
    }
    case "snapshot":
      applySnapshot(state, d, event.ts);
      break;
    case "run.completed":
      ended(state, event);
      state.status = "completed";
      state.finishReason = d.finish_reason || "";
      state.maxIterationsReached = Boolean(d.max_iterations_reached);
      state.notice = "";
      break;
    case "run.failed":
      ended(state, event);
      state.status = "failed";
      state.error = d.error || "The run failed.";
      state.notice = "";
      settleUnfinishedTools(state);
      break;
    case "run.cancelled":
      ended(state, event);
      state.status = "cancelled";
      state.notice = "";
      settleUnfinishedTools(state);
      break;
    default:
      break;
  }
  return true;
}

// A terminal event: the stored answer's id and when the run ended (the
// answer's time, as a reloaded page shows it).
function ended(state, event) {
  state.messageId = (event.data && event.data.message_id) || "";
  state.endedAt = event.ts || new Date().toISOString();
}

// "Replace what you have for this run", keeping the text the current turn
// streamed (a snapshot does not hold it) and the decisions on calls: the
// snapshot's own (``approvals``), and those the events told.
function applySnapshot(state, d, ts) {
  const streaming = state.rounds.find((r) => r.iteration === d.iteration);
  const keep = streaming ? { text: streaming.text, reasoning: streaming.reasoning } : null;
  const decided = { ...(d.approvals || {}), ...decidedApprovals(state) };
  state.rounds = [];
  state.status = d.status;
  state.iteration = d.iteration;
  state.error = d.error || "";
  if (d.message) {
    const stored = stateFromMessage(d.message);
    state.rounds = stored.rounds;
    state.finishReason = stored.finishReason;
    state.messageId = stored.messageId;
    state.endedAt = ts || new Date().toISOString();
    // The stored answer says which model answered; keep what the run said otherwise.
    state.model = stored.model || state.model;
    state.assistant = stored.assistant || state.assistant;
    applyApprovals(state, decided);
    return;
  }
  applyRounds(state, d.rounds);
  applyApprovals(state, decided);
  applyPendingApprovals(state, d.pending_approvals);
  if (keep && !state.rounds.some((r) => r.iteration === d.iteration)) {
    Object.assign(roundFor(state, d.iteration), keep);
  }
}

// Who answers a run (GET /api/runs/{id}/: its ``model`` and
// ``options.assistant``); no event carries them.
export function applyRunInfo(state, run) {
  state.model = run.model || state.model;
  state.assistant = (run.options && run.options.assistant) || state.assistant;
}

// The reply's whole text (every round's), as a reader sees it.
export function fullText(state) {
  return state.rounds.map((r) => r.text).filter(Boolean).join("\n\n");
}
