// ragattn page: calls /v2/rerank and /v1/compress and shows both. No dependencies, no build step.
// All text goes into the DOM through textContent, never innerHTML.
"use strict";

const $ = (sel) => document.querySelector(sel);

const BUDGETS = {
  ratio: { label: "Fraction of tokens to keep (0–1]", min: "0.01", max: "1", step: "0.05", value: "0.3" },
  target_tokens: { label: "Tokens to keep at most", min: "1", max: "", step: "1", value: "60" },
  threshold: { label: "Keep sentences scoring at least [0–1]", min: "0", max: "1", step: "0.05", value: "0.5" },
};

class ApiError extends Error {
  constructor(errorType, message, status, route = "") {
    super(message);
    this.errorType = errorType;
    this.status = status;
    this.route = route;
  }
}

function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

async function post(path, body) {
  const headers = { "content-type": "application/json" };
  const key = $("#api-key").value.trim();
  if (key) headers.authorization = "Bearer " + key;
  let resp;
  try {
    resp = await fetch(path, { method: "POST", headers, body: JSON.stringify(body) });
  } catch (err) {
    throw new ApiError("network_error", "could not reach the server: " + err.message, 0, path);
  }
  const data = await resp.json().catch(() => null);
  if (!resp.ok) {
    throw new ApiError(data?.error_type ?? "http_error", data?.message ?? resp.statusText, resp.status, path);
  }
  return data;
}

function documentsFromInput() {
  return $("#documents").value.split(/\n\s*\n/).map((t) => t.trim()).filter(Boolean);
}

function budgetFromInput() {
  const kind = document.querySelector('input[name="budget"]:checked').value;
  const raw = $("#budget-value").value.trim();
  // An empty or non-numeric value is sent as-is so the API's own validation explains it.
  const value = raw === "" || Number.isNaN(Number(raw)) ? raw : Number(raw);
  return { [kind]: value };
}

function scoreBin(score) {
  return Math.min(3, Math.floor(Math.max(0, score) * 4));
}

// The API's spans count code points (Python string indices); JavaScript strings index UTF-16 code
// units, where a code point above U+FFFF (emoji, each half of a flag) takes two. This maps every
// code-point offset 0..n to its UTF-16 index.
function utf16Offsets(text) {
  const out = [0];
  let unit = 0;
  for (const ch of text) { // iterates code points
    unit += ch.length;
    out.push(unit);
  }
  return out;
}

// The document's text with kept spans as <mark> (coloured by score) and the rest greyed.
function highlighted(text, spans) {
  const body = el("p", { className: "doc-text" });
  const at = utf16Offsets(text);
  const unit = (cp) => at[Math.min(Math.max(cp, 0), at.length - 1)];
  let pos = 0;
  for (const s of [...spans].sort((a, b) => a.start - b.start)) {
    const start = unit(s.start), end = unit(s.end);
    if (start > pos) body.append(el("span", { className: "dropped" }, text.slice(pos, start)));
    body.append(el("mark", {
      className: "kept s" + scoreBin(s.score), title: "kept, score " + s.score.toFixed(2),
    }, text.slice(start, end)));
    pos = Math.max(pos, end);
  }
  if (pos < text.length) body.append(el("span", { className: "dropped" }, text.slice(pos)));
  return body;
}

function renderRanking(rerank, compress, docs) {
  const byIndex = new Map((compress?.documents ?? []).map((d) => [d.index, d]));
  const items = rerank.results.map((r, rank) => {
    const score = r.relevance_score;
    const comp = byIndex.get(r.index);
    const fill = el("span", { className: "fill" });
    fill.style.width = (score * 100).toFixed(1) + "%";
    const bar = el("span", { className: "bar" }, fill);
    bar.setAttribute("aria-hidden", "true");
    const head = el("div", { className: "doc-head" },
      el("span", { className: "rank" }, "#" + (rank + 1)),
      el("span", { className: "origin" }, "first-stage position " + (r.index + 1)),
      bar,
      el("span", { className: "score" }, "relevance " + score.toFixed(3)));
    const kept = comp
      ? el("p", { className: "kept-count" },
        "kept " + comp.kept_spans.length + " of " + comp.sentence_scores.length + " sentences")
      : "";
    const text = comp ? highlighted(docs[r.index], comp.kept_spans) : el("p", { className: "doc-text" }, docs[r.index]);
    const li = el("li", {}, head, kept, text);
    li.dataset.index = r.index;
    li.dataset.score = score;
    return li;
  });
  $("#ranking").replaceChildren(...items);
}

function renderSummary(compress) {
  $("#summary").hidden = !compress;
  if (!compress) return;
  $("#origin-tokens").textContent = compress.origin_tokens;
  $("#compressed-tokens").textContent = compress.compressed_tokens;
  const factor = compress.ratio > 0 ? " (" + (1 / compress.ratio).toFixed(1) + "× smaller)" : "";
  $("#ratio").textContent = (compress.ratio * 100).toFixed(1) + "%" + factor;
  $("#tokenizer").textContent = compress.tokenizer + " · method " + compress.method;
}

function renderMessages(errors, warnings) {
  $("#errors").replaceChildren(...errors.map((e) => el("p", { className: "error" },
    e.route ? e.route + ": " : "",
    el("strong", { className: "error-type" }, e.errorType),
    (e.status ? " (HTTP " + e.status + ")" : "") + " — " + e.message)));
  $("#warnings").hidden = warnings.length === 0;
  $("#warning-list").replaceChildren(...warnings.map((w) => el("li", {}, w)));
}

async function run(event) {
  event.preventDefault();
  const query = $("#query").value;
  const docs = documentsFromInput();
  const button = $("#run");
  button.disabled = true;
  $("#status").textContent = "Running…";
  const started = performance.now();
  const [rerank, compress] = await Promise.allSettled([
    post("/v2/rerank", { query, documents: docs }),
    post("/v1/compress", { query, documents: docs, method: $("#method").value || undefined, ...budgetFromInput() }),
  ]);
  button.disabled = false;
  const errors = [rerank, compress].filter((r) => r.status === "rejected").map((r) =>
    r.reason instanceof ApiError ? r.reason : new ApiError("client_error", String(r.reason), 0));
  const rr = rerank.value;
  const cp = compress.value;
  renderMessages(errors, [...(rr?.meta?.warnings ?? []), ...(cp?.warnings ?? [])]);
  renderSummary(cp);
  if (rr) renderRanking(rr, cp, docs); else $("#ranking").replaceChildren();
  const secs = ((performance.now() - started) / 1000).toFixed(1);
  $("#status").textContent = errors.length
    ? "Finished with " + errors.length + " error" + (errors.length > 1 ? "s" : "") + " after " + secs + " s."
    : "Done in " + secs + " s: " + rr.results.length + " documents reranked and compressed.";
  $("#results").focus();
}

function onBudgetChange() {
  const b = BUDGETS[document.querySelector('input[name="budget"]:checked').value];
  const input = $("#budget-value");
  $("#budget-label").textContent = b.label;
  Object.assign(input, { min: b.min, max: b.max, step: b.step, value: b.value });
}

async function loadExample() {
  try {
    const resp = await fetch("/demo.json");
    if (!resp.ok) throw new ApiError("http_error", resp.statusText, resp.status);
    const ex = await resp.json();
    $("#query").value = ex.query;
    $("#documents").value = ex.documents.map((d) => d.text).join("\n\n");
    $("#status").textContent = "Example loaded: " + ex.documents.length + " documents.";
  } catch (err) {
    renderMessages([err instanceof ApiError ? err : new ApiError("network_error", err.message, 0)], []);
  }
}

async function showServer() {
  const data = await fetch("/ready").then((r) => r.json()).catch(() => null);
  if (data?.status === "ready") {
    $("#server-info").textContent = "Server: " + data.model + ", rerank method " + data.rerank_method + ".";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("#run-form").addEventListener("submit", run);
  $("#load-example").addEventListener("click", loadExample);
  for (const r of document.querySelectorAll('input[name="budget"]')) r.addEventListener("change", onBudgetChange);
  showServer();
});
