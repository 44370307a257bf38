// The REST API from the browser: session cookie plus the CSRF token, JSON
// in and out, and the API's error message (never a bare status) on failure.

const csrfToken = document.querySelector('meta[name="csrf-token"]').content;

export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || `The server answered ${status}.`);
    this.status = status;
    this.code = error.code || "";
    this.details = error.details || {};
  }
}

export async function api(method, path, body) {
  let response;
  try {
    response = await fetch(path, {
      method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken, Accept: "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, { error: { message: "Could not reach the server; check your connection and try again." } });
  }
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export function pageData(id = "page-data") {
  return JSON.parse(document.getElementById(id).textContent);
}
