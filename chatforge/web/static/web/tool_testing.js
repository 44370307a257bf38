// The tool testing page (docs/web.md, "Tool testing"): pick a model, run
// a query through POST /api/tools/test, show each tool call with its result
// and iteration, the final answer and whether the iteration cap was hit.

import { api, pageData } from "./api.js";
import { formatMs, pretty } from "./run_render.js";

const page = pageData();
const models = new Map(page.models.models.map((m) => [m.id, m]));
const form = document.getElementById("test-form");
const modelSelect = document.getElementById("test-model");
const query = document.getElementById("test-query");
const runButton = document.getElementById("run-test");
const errorEl = document.getElementById("test-error");

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function validationBadge(validation) {
  if (!validation || !validation.tests) return { cls: "", text: "not tested yet" };
  const rate = `${validation.successes}/${validation.tests} tests, ${Math.round(validation.success_rate * 100)}%`;
  return validation.validated ? { cls: "good", text: `validated (${rate})` } : { cls: "bad", text: `not validated (${rate})` };
}

function showBadge() {
  const model = models.get(modelSelect.value);
  const badge = validationBadge(model && model.validation);
  const holder = document.getElementById("model-badge");
  holder.replaceChildren();
  const span = el("span", `badge ${badge.cls}`, `Tool calling: ${badge.text}`);
  span.id = "validation-badge";
  holder.append(span);
  if (model && !model.capabilities.tools) holder.append(el("span", "muted", " This model is configured without tool calling."));
}

function toolCallCard(call) {
  const card = el("div", "test-call");
  card.dataset.tool = call.name;
  card.dataset.status = call.status;
  const head = el("div", "test-call-head");
  head.append(el("span", "mono tool-name", call.name), el("span", "mono", `(${call.arguments || "{}"})`),
    el("span", "badge tool-status", call.status));
  head.querySelector(".tool-status").dataset.status = call.status;
  const result = el("pre", "mono tool-output", pretty(call.result ?? ""));
  const meta = el("div", "muted", `Iteration: ${call.iteration} | Execution time: ${formatMs(call.execution_time_ms) || "n/a"}`);
  card.append(head, el("div", "label", call.status === "success" ? "Result" : "Error"), result, meta);
  return card;
}

function showResult(result) {
  const section = document.getElementById("test-results");
  section.hidden = false;
  section.dataset.success = String(result.success);
  const summary = document.getElementById("result-summary");
  summary.replaceChildren(
    el("span", `badge ${result.success ? "good" : "bad"}`, result.success ? "success" : "failure"),
    el("span", "", ` Model: ${result.model} · run ${result.status}`),
  );
  if (result.error) summary.append(el("p", "error", result.error));
  if (result.max_iterations_reached) summary.append(el("p", "warning", "⚠ Max iterations reached"));
  const recorded = el("p", "muted", result.recorded
    ? "Recorded toward this model's validation status."
    : (document.getElementById("record-test")
      ? "Not recorded toward the model's validation status (tick “Count this test” to record it)."
      : "Not recorded: only tests by staff count toward a model's shared validation status."));
  recorded.id = "result-recorded";
  summary.append(recorded);
  const calls = result.tool_calls || [];
  document.getElementById("result-calls-title").textContent = `Tool calls (${calls.length})`;
  document.getElementById("result-calls").replaceChildren(...calls.map(toolCallCard));
  if (!calls.length) document.getElementById("result-calls").append(el("p", "muted", "The model called no tools."));
  document.getElementById("result-answer").textContent = result.answer || "(no answer)";
  if (result.validation) {
    const model = models.get(result.model);
    if (model) model.validation = result.validation;
    showBadge();
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  errorEl.hidden = true;
  if (!query.value.trim()) {
    errorEl.textContent = "Enter a test query (or pick an example below).";
    errorEl.hidden = false;
    return;
  }
  const tools = [...document.querySelectorAll("input[name=test-tool]:checked")].map((b) => b.value);
  runButton.disabled = true;
  runButton.textContent = "Testing…";
  try {
    // Recorded only when asked: trying examples must not move a model's
    // shared validation rate.
    const record = Boolean(document.getElementById("record-test")?.checked);
    showResult(await api("POST", "/api/tools/test", { query: query.value, model: modelSelect.value, tools, record }));
  } catch (error) {
    errorEl.textContent = error.message;
    errorEl.hidden = false;
  } finally {
    runButton.disabled = false;
    runButton.textContent = "Run test";
  }
});

document.querySelectorAll(".example").forEach((button) => {
  button.addEventListener("click", () => { query.value = button.dataset.query; query.focus(); });
});
modelSelect.addEventListener("change", showBadge);
showBadge();
