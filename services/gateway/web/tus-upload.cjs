// tus-upload.cjs uploads a file to shipfile with tus-js-client under Node, as an outside
// client would (the gateway's tests run it: internal/transport/httpapi/tus_node_test.go).
//
//   node tus-upload.cjs ENDPOINT FILE [CHUNK_SIZE [BREAK_AT]]
//
// TUS_TOKEN (env) is sent as the bearer token when set. With BREAK_AT, the upload is
// aborted once the gateway accepted that many bytes (sent in 1 MiB chunks), then a new Upload goes on from the same upload
// URL (HEAD, then PATCH from the server's offset). It prints one JSON line:
// {"firstUrl" (the broken upload's URL), "url", "fileId", "resumedFrom"}; any failure exits non-zero.
"use strict";
const fs = require("fs");
const path = require("path");
const tus = require("tus-js-client");

const [endpoint, file, chunk, breakAt] = process.argv.slice(2);
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

function run(extra) {
  return new Promise((resolve, reject) => {
    const upload = new tus.Upload(data, {
      ...options,
      ...extra,
      onError: reject,
      onSuccess: (payload) => resolve({ upload, fileId: payload.lastResponse.getHeader("Shipfile-File-Id") }),
    });
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
  // The broken run sends 1 MiB chunks until the gateway accepted BREAK_AT bytes.
  let res = await run(breakAt ? { breakAt: Number(breakAt), chunkSize: 1 << 20 } : {});
  if (res.broken) {
    const url = res.upload.url;
    firstUrl = url;
    // A new client goes on from the upload URL: tus-js-client asks HEAD for the offset.
    const probe = await fetch(url, { method: "HEAD", headers: { ...headers, "Tus-Resumable": "1.0.0" } });
    resumedFrom = Number(probe.headers.get("upload-offset"));
    res = await run({ uploadUrl: url });
  }
  console.log(JSON.stringify({ firstUrl, url: res.upload.url, fileId: res.fileId, resumedFrom }));
})().catch((err) => {
  console.error("tus upload failed:", err && err.message ? err.message : err);
  process.exit(1);
});
