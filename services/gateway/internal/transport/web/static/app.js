// shipfile web UI: copy buttons and upload zones. Served from this origin under a
// Content-Security-Policy that allows no inline script.
(function () {
  "use strict";

  // The page's words for what this script shows (the catalog's js table), English
  // where the page gives none.
  var messages = {};
  try { messages = JSON.parse(document.documentElement.getAttribute("data-messages") || "{}"); } catch (e) { /* English */ }
  function msg(key, english) { return messages[key] || english; }
  // shipfileMsg(key, english) is msg for the pages' other scripts.
  window.shipfileMsg = msg;
  var pageLang = document.documentElement.lang || "en";

  var meta = document.querySelector('meta[name="csrf-token"]');
  var csrf = meta ? meta.getAttribute("content") : "";

  // Copy buttons: data-copy names the input whose value is copied.
  document.querySelectorAll("[data-copy]").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var el = document.getElementById(btn.getAttribute("data-copy"));
      if (!el) return;
      var done = function () {
        btn.textContent = msg("copied", "Copied");
        setTimeout(function () { btn.textContent = msg("copy", "Copy"); }, 2000);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(el.value).then(done, function () { fallback(el); done(); });
      } else {
        fallback(el);
        done();
      }
    });
  });

  // Generate buttons: data-generate names the input that gets a random password
  // (20 characters from an alphabet without look-alikes, from the browser's CSPRNG).
  document.querySelectorAll("[data-generate]").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var el = document.getElementById(btn.getAttribute("data-generate"));
      if (!el || !window.crypto || !window.crypto.getRandomValues) return;
      var alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
      var out = "";
      var buf = new Uint32Array(1);
      while (out.length < 20) {
        window.crypto.getRandomValues(buf);
        // Reject the top of the range so every character is equally likely.
        if (buf[0] >= Math.floor(4294967296 / alphabet.length) * alphabet.length) continue;
        out += alphabet.charAt(buf[0] % alphabet.length);
      }
      el.value = out;
      el.dispatchEvent(new Event("input"));
    });
  });

  // The language switcher keeps the page's fragment: on an end-to-end encrypted
  // package's page it holds the key, which never goes to the server.
  document.querySelectorAll("a[data-lang]").forEach(function (a) {
    a.addEventListener("click", function () {
      if (location.hash) a.setAttribute("href", a.getAttribute("href").split("#")[0] + location.hash);
    });
  });

  function fallback(el) {
    el.focus();
    el.select();
    try { document.execCommand("copy"); } catch (e) { /* the text stays selected */ }
  }

  // human formats a byte count the way the page's language writes it: "1.5 MiB",
  // "1,5 MiB", French "1,5 Mio" (pkg/i18n's Size).
  function human(n) {
    var units = pageLang === "fr" ? ["o", "Kio", "Mio", "Gio", "Tio"] : ["B", "KiB", "MiB", "GiB", "TiB"];
    var i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    var num = i === 0 ? String(Math.round(n)) : n.toFixed(1);
    if (pageLang !== "en" && i > 0) num = n.toLocaleString(pageLang, { minimumFractionDigits: 1, maximumFractionDigits: 1, useGrouping: false });
    return num + " " + units[i];
  }

  // shipfileUploadZone(zone, send) makes zone an upload zone: files chosen in its file
  // input or dropped on it queue up and go one at a time, each with a row in its
  // .uploads list (li[data-state][data-name]: queued, then what send sets, then done or
  // error) with a progress bar, bytes and throughput. send(job, tus) uploads one job
  // ({file, row: {li, bar, stats}}) and returns a Promise of the row's final text; it
  // rejects with the reason the file failed. tus(enc) sends the job through tus (see
  // sendTus). The zone has data-busy while files are queued; with data-reload the page
  // reloads when all of them went through, so the server's list shows them.
  function uploadZone(zone, send) {
    var input = zone.querySelector("input[type=file]");
    var list = zone.querySelector(".uploads");
    var queue = [];
    var busy = false;
    var ok = 0;
    var failed = 0;

    input.addEventListener("change", function () {
      add(input.files);
      input.value = "";
    });
    ["dragenter", "dragover"].forEach(function (t) {
      zone.addEventListener(t, function (e) { e.preventDefault(); zone.classList.add("over"); });
    });
    ["dragleave", "drop"].forEach(function (t) {
      zone.addEventListener(t, function () { zone.classList.remove("over"); });
    });
    zone.addEventListener("drop", function (e) {
      e.preventDefault();
      if (e.dataTransfer && e.dataTransfer.files) add(e.dataTransfer.files);
    });

    function add(files) {
      for (var i = 0; i < files.length; i++) queue.push({ file: files[i], row: row(files[i]) });
      zone.setAttribute("data-busy", "1");
      next();
    }

    function row(file) {
      var li = document.createElement("li");
      li.setAttribute("data-state", "queued");
      li.setAttribute("data-name", file.name);
      var name = document.createElement("div");
      name.className = "name";
      name.textContent = file.name;
      var bar = document.createElement("progress");
      bar.max = file.size || 1;
      bar.value = 0;
      var stats = document.createElement("div");
      stats.className = "stats";
      stats.textContent = msg("waiting", "waiting") + " · " + human(file.size);
      li.appendChild(name);
      li.appendChild(bar);
      li.appendChild(stats);
      list.appendChild(li);
      return { li: li, bar: bar, stats: stats };
    }

    function next() {
      if (busy) return;
      var job = queue.shift();
      if (!job) {
        zone.removeAttribute("data-busy");
        if (zone.hasAttribute("data-reload") && ok > 0 && failed === 0) {
          setTimeout(function () { window.location.reload(); }, 700);
        }
        return;
      }
      busy = true;
      var r = job.row;
      Promise.resolve().then(function () {
        return send(job, function (enc) { return sendTus(zone, job, enc); });
      }).then(function (text) {
        ok++;
        r.bar.max = 1;
        r.bar.value = 1;
        r.li.setAttribute("data-state", "done");
        r.stats.textContent = text;
      }, function (err) {
        failed++;
        r.li.setAttribute("data-state", "error");
        r.stats.textContent = msg("failed", "failed:") + " " + ((err && err.message) || String(err));
      }).then(function () {
        busy = false;
        next();
      });
    }
  }
  window.shipfileUploadZone = uploadZone;
  // shipfileHuman(n) formats a byte count (1.5 MiB), for the e2e pages.
  window.shipfileHuman = human;

  function seconds(start) { return Math.max((performance.now() - start) / 1000, 0.001); }

  function uploaded(what, file, start) {
    var secs = seconds(start);
    return what + " · " + human(file.size) + " " + msg("in", "in") + " " + secs.toFixed(1) + " s · " + human(file.size / secs) + "/s";
  }

  function tusReady(zone) {
    return !!(window.tus && window.tus.isSupported && zone.hasAttribute("data-tus-url"));
  }

  // Waits between tus retries (ms): a drop of a minute or so is ridden out; after
  // the last, the upload goes on when the browser is back online.
  var tusRetryDelays = [0, 1000, 2000, 3000, 5000, 5000, 10000, 10000, 20000, 30000];

  // sendTus sends a job to the zone's data-tus-url with the tus resumable-upload
  // protocol: it retries by itself after a network drop (also while the browser says
  // it is offline) and, after a reload, choosing the same file again goes on where it
  // stopped (tus-js-client remembers the upload URL by the file's fingerprint in
  // localStorage). With enc ({input: a stream reader of the ciphertext, uploadSize,
  // chunkSize, metadata, onUploaded(fileId) → Promise, optional}) it sends that
  // ciphertext instead of the file: resumable within the page (tus retries from the
  // server's offset within the chunk it holds); a reload starts the file over, since
  // the file key is not kept.
  function sendTus(zone, job, enc) {
    var file = job.file, r = job.row;
    var start = performance.now();
    var startBytes = enc ? 0 : -1;
    var settled = false;
    var headers = {};
    if (zone.hasAttribute("data-csrf")) headers["X-CSRF-Token"] = csrf;
    r.li.setAttribute("data-state", "uploading");
    r.li.setAttribute("data-transport", "tus");
    return new Promise(function (resolve, reject) {
      var opts = {
        endpoint: zone.getAttribute("data-tus-url"),
        headers: headers,
        metadata: { filename: file.name, filetype: file.type || "application/octet-stream" },
        retryDelays: tusRetryDelays,
        removeFingerprintOnSuccess: true,
        // Retry network failures even while navigator.onLine is false (the default
        // gives up at once then), and the answers tus says to retry.
        onShouldRetry: function (err) {
          var res = err.originalResponse;
          var status = res ? res.getStatus() : 0;
          r.li.setAttribute("data-retried", "1");
          r.stats.textContent = msg("retrying", "connection lost · retrying…");
          return status === 0 || status >= 500 || status === 409 || status === 423 || status === 429;
        },
        onProgress: function (sent, total) {
          if (startBytes < 0) startBytes = sent; // what an earlier page already sent
          r.bar.max = total || 1;
          r.bar.value = sent;
          r.li.setAttribute("data-sent", String(sent));
          r.stats.textContent = (enc ? msg("encrypted", "encrypted") + " · " : "") + human(sent) + " " + msg("of", "of") + " " + human(total) + " · " + human(Math.max(sent - startBytes, 0) / seconds(start)) + "/s";
        },
        onSuccess: function (payload) {
          if (settled) return;
          settled = true;
          var text = uploaded(enc ? msg("encrypted_uploaded", "encrypted and uploaded") : msg("uploaded", "uploaded"), file, start);
          if (!enc || !enc.onUploaded) { resolve(text); return; }
          var res = payload && payload.lastResponse;
          Promise.resolve(enc.onUploaded(res ? res.getHeader("Shipfile-File-Id") : "")).then(function () { resolve(text); }, reject);
        },
        onError: function (err) {
          var res = err.originalResponse;
          var status = res ? res.getStatus() : 0;
          if (status === 0 && !/source|reader|stream|encrypt/i.test(String(err && err.message))) {
            // Still no network after every retry: go on when the browser is back online.
            r.stats.textContent = msg("offline", "waiting for the network…");
            window.addEventListener("online", function () { upload.start(); }, { once: true });
            return;
          }
          if (settled) return;
          settled = true;
          var why = status ? msg("server_answered", "the server answered") + " " + status : String(err && err.message ? err.message : err);
          try {
            var body = JSON.parse(res.getBody());
            if (body && body.detail) why = body.detail;
          } catch (e) { /* not JSON */ }
          reject(new Error(why));
        }
      };
      if (enc) {
        // Ciphertext: a stream of known length, held a chunk at a time for retries; no
        // fingerprint (the same file encrypts to other bytes each time).
        opts.uploadSize = enc.uploadSize;
        opts.chunkSize = enc.chunkSize;
        opts.metadata = enc.metadata;
        opts.storeFingerprintForResuming = false;
        opts.removeFingerprintOnSuccess = false;
      }
      var upload = new window.tus.Upload(enc ? enc.input : file, opts);
      if (enc) {
        upload.start();
        return;
      }
      upload.findPreviousUploads().then(function (previous) {
        if (previous.length > 0) {
          upload.resumeFromPreviousUpload(previous[0]);
          r.li.setAttribute("data-resumed", "1");
        }
        upload.start();
      }, function () { upload.start(); });
    });
  }

  // post sends a job as a multipart POST (part "file") to the zone's data-upload-url.
  function post(zone, job) {
    var file = job.file, r = job.row;
    return new Promise(function (resolve, reject) {
      var xhr = new XMLHttpRequest();
      var start = performance.now();
      xhr.open("POST", zone.getAttribute("data-upload-url"));
      if (zone.hasAttribute("data-csrf")) xhr.setRequestHeader("X-CSRF-Token", csrf);
      r.li.setAttribute("data-state", "uploading");
      xhr.upload.addEventListener("progress", function (e) {
        var total = e.lengthComputable ? e.total : file.size;
        r.bar.max = total || 1;
        r.bar.value = e.loaded;
        r.stats.textContent = human(e.loaded) + " of " + human(total) + " · " + human(e.loaded / seconds(start)) + "/s";
      });
      xhr.addEventListener("load", function () {
        if (xhr.status === 201) resolve(uploaded("uploaded", file, start));
        else reject(new Error(detail(xhr)));
      });
      xhr.addEventListener("error", function () { reject(new Error("the connection broke off")); });
      var form = new FormData();
      form.append("file", file, file.name);
      xhr.send(form);
    });
  }

  function detail(xhr) {
    try {
      var body = JSON.parse(xhr.responseText);
      if (body && body.detail) return body.detail;
    } catch (e) { /* not JSON */ }
    return msg("server_answered", "the server answered") + " " + xhr.status;
  }

  // The page's upload zones ([data-upload-url]): with tus-js-client loaded
  // (/static/docs/tus.min.js) and data-tus-url set, a file goes up with tus (sendTus),
  // otherwise it is POSTed. data-csrf sends the session's CSRF token. An end-to-end
  // encrypted zone (static/e2e-outbound.js sets zone.shipfileEncrypt(file), which
  // gives sendTus's enc) sends ciphertext only, and only through tus.
  document.querySelectorAll("[data-upload-url]").forEach(function (zone) {
    uploadZone(zone, function (job, tus) {
      if (zone.shipfileEncrypt || zone.hasAttribute("data-e2e")) {
        if (!tusReady(zone)) throw new Error("this browser cannot upload encrypted files (no resumable uploads)");
        if (!zone.shipfileEncrypt) throw new Error("encryption is not ready in this page (reload it)");
        job.row.li.setAttribute("data-state", "encrypting");
        job.row.li.setAttribute("data-encrypted", "1");
        job.row.stats.textContent = msg("encrypting", "encrypting…");
        return Promise.resolve(zone.shipfileEncrypt(job.file)).then(tus);
      }
      return tusReady(zone) ? tus() : post(zone, job);
    });
  });
})();
