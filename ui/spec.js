// The API description the server serves (/openapi.json), read once: the page takes its
// enumerations (policies, proposers, families, triggers) from it and feature-detects
// endpoints, so it follows the server it talks to.

let loaded = null;

// The document (a promise; fetched once per page load). Resolves to {} when it cannot
// be read, so callers fall back to their defaults.
export function spec() {
  if (!loaded) {
    loaded = fetch('/openapi.json', {cache: 'no-store'})
      .then((r) => (r.ok ? r.json() : {}))
      .catch(() => ({}));
  }
  return loaded;
}

// The enum of components.schemas[name], or fallback.
export async function enumOf(name, fallback) {
  const doc = await spec();
  const e = doc.components?.schemas?.[name]?.enum;
  return Array.isArray(e) ? e : fallback;
}

// Whether the server has path (e.g. "/v1/servers") with a GET.
export async function hasPath(path) {
  const doc = await spec();
  return Boolean(doc.paths?.[path]?.get);
}
