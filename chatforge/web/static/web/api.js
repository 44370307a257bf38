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

// A multipart upload with progress, which fetch() cannot report: an
// XMLHttpRequest with the same cookie, CSRF header and error message as
// api(). ``onProgress(fraction)`` is called as the body goes out (0..1).
// Returns {promise, abort}; the promise resolves to the JSON body, or
// rejects with an ApiError (an aborted upload rejects with status 0 and
// code "aborted").
export function upload(path, formData, onProgress = () => {}) {
  const xhr = new XMLHttpRequest();
  const promise = new Promise((resolve, reject) => {
    xhr.open("POST", path);
    xhr.withCredentials = true;
    xhr.setRequestHeader("X-CSRFToken", csrfToken);
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable && event.total > 0) onProgress(event.loaded / event.total);
    });
    xhr.addEventListener("load", () => {
      let data = null;
      try { data = xhr.responseText ? JSON.parse(xhr.responseText) : null; } catch { data = null; }
      if (xhr.status >= 200 && xhr.status < 300) resolve(data);
      else reject(new ApiError(xhr.status, data));
    });
    xhr.addEventListener("error", () => reject(new ApiError(0, {
      error: { message: "The upload did not reach the server; check your connection and try again." },
    })));
    xhr.addEventListener("abort", () => reject(new ApiError(0, { error: { code: "aborted", message: "Cancelled." } })));
    xhr.send(formData);
  });
  return { promise, abort: () => xhr.abort() };
}
