// shipfile's download service worker (served at /sw-e2e.js, scope /e2e/): it writes
// end-to-end encrypted files to disk decrypted, as they arrive, so memory stays bounded
// for a file of any size (the approach of Firefox Send). A page posts it a job (the
// ciphertext's URL, the file's name and size, the key) with a MessagePort, then opens
// /e2e/file/<id> or /e2e/zip/<id>; the worker answers that navigation with the
// decrypted stream as an attachment, which the browser saves. Progress, the end and any
// failure go back over the port. On a failure mid-stream (age's authentication: the
// object was altered) the stream errors, so the browser marks the download failed
// instead of keeping a truncated file. The key stays in this worker's memory for the
// job only; nothing is written anywhere.
/* global importScripts, shipfileE2E, shipfileVendor */
"use strict";
importScripts("/static/docs/e2e.bundle.js", "/static/ui/e2e.js");

var jobs = new Map();
var jobTTL = 60000; // a job not opened within a minute is dropped (with its key)

self.addEventListener("install", function () { self.skipWaiting(); });
self.addEventListener("activate", function (e) { e.waitUntil(self.clients.claim()); });

self.addEventListener("message", function (e) {
  var m = e.data || {};
  if (m.type !== "job" || !e.ports[0] || typeof m.id !== "string") return; // "ping": the event itself keeps us alive
  var port = e.ports[0];
  jobs.set(m.id, { job: m.job, port: port });
  setTimeout(function () { jobs.delete(m.id); }, jobTTL);
  port.postMessage({ type: "ready" });
});

self.addEventListener("fetch", function (e) {
  var url = new URL(e.request.url);
  var m = /^\/e2e\/(file|zip)\/([0-9a-f]{32})$/.exec(url.pathname);
  if (url.origin !== self.location.origin || !m) return;
  var rec = jobs.get(m[2]);
  jobs.delete(m[2]);
  if (!rec) {
    e.respondWith(new Response("This download has expired: go back to the page and click Download again.",
      { status: 404, headers: { "Content-Type": "text/plain; charset=utf-8" } }));
    return;
  }
  e.respondWith(m[1] === "zip" ? respondZip(rec) : respondFile(rec));
});

// noContent keeps the page where it is (a navigation answered 204 goes nowhere) after
// a failure that happened before any byte; the page shows the port's error.
function fail(port, err) {
  var e = shipfileE2E.classify(err);
  port.postMessage({ type: "error", kind: e.kind, message: e.message });
  return new Response(null, { status: 204 });
}

function attachment(body, name, length) {
  var h = {
    "Content-Type": "application/octet-stream",
    "Content-Disposition": shipfileE2E.contentDisposition(name),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store"
  };
  if (length != null && length >= 0) h["Content-Length"] = String(length);
  return new Response(body, { status: 200, headers: h });
}

// reporting passes src through, telling the page how far it got, and errors (rather
// than ends) when src fails, so the download is marked failed.
function reporting(src, port) {
  var reader = src.getReader();
  var bytes = 0;
  var last = 0;
  return new ReadableStream({
    pull: function (c) {
      return reader.read().then(function (r) {
        if (r.done) {
          port.postMessage({ type: "done", bytes: bytes });
          c.close();
          return;
        }
        bytes += r.value.length;
        c.enqueue(r.value);
        var now = Date.now();
        if (now - last > 250) {
          last = now;
          port.postMessage({ type: "progress", bytes: bytes });
        }
      }, function (err) {
        var e = shipfileE2E.classify(err);
        port.postMessage({ type: "error", kind: e.kind, message: e.message, bytes: bytes });
        c.error(e);
      });
    },
    cancel: function (why) {
      port.postMessage({ type: "error", kind: "cancelled", message: "The download was cancelled.", bytes: bytes });
      return reader.cancel(why);
    }
  }, { highWaterMark: 1 });
}

async function respondFile(rec) {
  var job = rec.job;
  try {
    var d = await shipfileE2E.fetchDecrypt(job.url, job.key);
    var size = d.size != null ? d.size : job.size;
    return attachment(reporting(d.stream, rec.port), job.name, size);
  } catch (err) {
    return fail(rec.port, err);
  }
}

async function respondZip(rec) {
  var job = rec.job;
  try {
    // Open the first file before answering, so a wrong key or a gone link fails here.
    var first = job.files.length ? await shipfileE2E.fetchDecrypt(job.files[0].url, job.key) : null;
    var entries = (async function* () {
      for (var i = 0; i < job.files.length; i++) {
        var f = job.files[i];
        var d = i === 0 ? first : await shipfileE2E.fetchDecrypt(f.url, job.key);
        yield { name: f.name, input: d.stream, size: f.size, lastModified: new Date() };
      }
    })();
    var known = job.files.every(function (f) { return typeof f.size === "number"; });
    var opts = known ? { metadata: job.files.map(function (f) { return { name: f.name, size: f.size }; }) } : {};
    var res = shipfileVendor.zip.downloadZip(entries, opts);
    var length = res.headers.get("Content-Length");
    return attachment(reporting(res.body, rec.port), job.zip, length == null ? null : Number(length));
  } catch (err) {
    return fail(rec.port, err);
  }
}
