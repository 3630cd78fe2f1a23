// tus-upload.cjs uploads a file to shipfile with tus-js-client under Node, as an outside
// client would (the gateway's tests run it: internal/transport/httpapi/tus_node_test.go).
//
//   node tus-upload.cjs ENDPOINT FILE [CHUNK_SIZE [BREAK_AT [MODE]]]
//
// TUS_TOKEN (env) is sent as the bearer token when set. With BREAK_AT, the upload is
// aborted once the gateway accepted that many bytes (sent in 1 MiB chunks), then a new Upload goes on from the same upload
// URL (HEAD, then PATCH from the server's offset). With MODE "midway", the upload is
// one PATCH of the whole file instead, broken midway (its connection closed once
// BREAK_AT bytes of its body went out), and the new Upload goes on at once; with MODE
// "stalled", that PATCH sends BREAK_AT bytes and then nothing, its connection left
// open (a network gone, which the gateway has not noticed), and the new Upload goes on
// at once beside it. It prints one JSON line:
// {"firstUrl" (the broken upload's URL), "url", "fileId", "resumedFrom",
//  "statuses" (every status the resumed Upload got), "resumeMs" (from the break to the end)};
// any failure exits non-zero.
"use strict";
const fs = require("fs");
const http = require("http");
const path = require("path");
const tus = require("tus-js-client");

const [endpoint, file, chunk, breakAt, mode] = process.argv.slice(2);
if (!endpoint || !file) {
  console.error("usage: node tus-upload.cjs ENDPOINT FILE [CHUNK_SIZE [BREAK_AT]]");
  process.exit(2);
}
const data = fs.readFileSync(file);
const headers = process.env.TUS_TOKEN ? { Authorization: "Bearer " + process.env.TUS_TOKEN } : {};
const options = {
  endpoint,
  headers,
  metadata: { filename: path.basename(file), filetype: "application/octet-stream" },
  retryDelays: [0, 200, 500, 1000, 2000],
  onShouldRetry: (err) => {
    const status = err.originalResponse ? err.originalResponse.getStatus() : 0;
    return status === 0 || status >= 500 || status === 409 || status === 423;
  },
};
if (chunk && Number(chunk) > 0) options.chunkSize = Number(chunk);

// PartialStack is tus-js-client's HTTP stack whose PATCH sends its first `at` bytes
// and then nothing more: with `cut` its connection is closed under the body once those
// are written (a network broken midway); without, it is kept open (a network gone
// quiet, which the gateway has not noticed). onBreak runs once those bytes are
// written. (Deterministic, unlike an abort from onProgress, which tus-js-client
// throttles to one call per 100 ms: a fast machine sent the whole PATCH in between.)
class PartialStack extends tus.DefaultHttpStack {
  constructor(at, cut, onBreak) {
    super();
    this.at = at;
    this.cut = cut;
    this.onBreak = onBreak;
    this.stalled = null;
  }

  createRequest(method, url) {
    const req = super.createRequest(method, url);
    if (method !== "PATCH") return req;
    req.send = (body) =>
      new Promise(() => {
        const u = new URL(url);
        const r = http.request({
          hostname: u.hostname,
          port: u.port,
          path: u.pathname,
          method,
          headers: { ...req._headers, "Content-Length": body.length },
        });
        r.on("error", () => {});
        this.stalled = r;
        r.write(body.subarray(0, this.at), () => {
          if (this.cut) r.destroy();
          this.onBreak();
        });
      });
    return req;
  }
}

function run(extra) {
  return new Promise((resolve, reject) => {
    const upload = new tus.Upload(data, {
      ...options,
      ...extra,
      onError: reject,
      onSuccess: (payload) => resolve({ upload, fileId: payload.lastResponse.getHeader("Shipfile-File-Id") }),
    });
    if (extra.stallAt || extra.breakMidway) {
      // One PATCH of the whole file that sends its first bytes and then is broken under
      // its body (midway: its connection closed) or goes quiet (stalled).
      const at = extra.stallAt || extra.breakMidway;
      extra.stack = new PartialStack(at, !!extra.breakMidway, () => resolve({ upload, broken: true }));
      upload.options.httpStack = extra.stack;
    }
    if (extra.breakAt) {
      upload.options.onChunkComplete = (_, accepted) => {
        if (accepted >= extra.breakAt && !upload._aborted) {
          upload._aborted = true;
          upload.abort().then(() => resolve({ upload, broken: true }));
        }
      };
    }
    upload.start();
  });
}

(async () => {
  let resumedFrom = null;
  let firstUrl = null;
  // The broken run sends 1 MiB chunks until the gateway accepted BREAK_AT bytes, or
  // (midway) one PATCH broken once BREAK_AT bytes of it went out.
  let first = {};
  if (breakAt && mode === "midway") first = { breakMidway: Number(breakAt) };
  else if (breakAt && mode === "stalled") first = { stallAt: Number(breakAt) };
  else if (breakAt) first = { breakAt: Number(breakAt), chunkSize: 1 << 20 };
  let res = await run(first);
  const statuses = [];
  let resumeMs = null;
  if (res.broken) {
    const start = Date.now();
    const url = res.upload.url;
    firstUrl = url;
    // A new client goes on from the upload URL: tus-js-client asks HEAD for the offset.
    const probe = await fetch(url, { method: "HEAD", headers: { ...headers, "Tus-Resumable": "1.0.0" } });
    resumedFrom = Number(probe.headers.get("upload-offset"));
    res = await run({
      uploadUrl: url,
      onAfterResponse: (_, response) => {
        statuses.push(response.getStatus());
      },
    });
    resumeMs = Date.now() - start;
    if (first.stack && first.stack.stalled) first.stack.stalled.destroy();
  }
  console.log(JSON.stringify({ firstUrl, url: res.upload.url, fileId: res.fileId, resumedFrom, statuses, resumeMs }));
})().catch((err) => {
  console.error("tus upload failed:", err && err.message ? err.message : err);
  process.exit(1);
});
