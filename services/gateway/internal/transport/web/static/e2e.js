// shipfile end-to-end encryption helpers (docs/ENCRYPTION.md), shared by
// the outbound pages (send, the recipient's link page), the inbound ones (account key,
// request page) and the service worker /sw-e2e.js. Needs /static/docs/e2e.bundle.js
// (self.shipfileVendor: age-encryption and client-zip) loaded first. Sets
// self.shipfileE2E. Nothing here sends a key, a passphrase or a file name to the server.
(function () {
  "use strict";

  var MAGIC = "age-encryption.org/v1\n";

  function vendor() {
    if (!self.shipfileVendor) throw new Error("the encryption bundle did not load");
    return self.shipfileVendor;
  }

  // E2EError carries a kind the pages turn into a message: "key" (this key or
  // passphrase does not open the file), "altered" (age's authentication failed: the
  // stored object was changed or cut short), "format" (not an age file), "network".
  function E2EError(kind, message, cause) {
    var e = new Error(message || messages[kind] || kind);
    e.name = "E2EError";
    e.kind = kind;
    if (cause) e.cause = cause;
    return e;
  }
  // The page's words (static/app.js's shipfileMsg), English where there are none (a worker).
  var T = (typeof self !== "undefined" && self.shipfileMsg) || function (key, english) { return english; };
  var messages = {
    key: T("e2e_key", "This key does not open these files. Check that you have the whole link, or the right passphrase."),
    altered: T("e2e_altered", "The file was altered after it was encrypted (or cut short): it failed the integrity check, so it was not saved."),
    format: T("e2e_format", "This is not an end-to-end encrypted file."),
    network: T("e2e_network", "The download broke off.")
  };

  // classify turns an error of age-encryption (or of a fetch) into an E2EError.
  function classify(err) {
    if (err && err.name === "E2EError") return err;
    var m = String((err && err.message) || err);
    if (/no identity matched|invalid identity|scrypt recipient is not the only one/.test(m)) return E2EError("key", null, err);
    if (/invalid tag|invalid header HMAC|final chunk is empty|ciphertext (is too small|size is invalid)|unexpected end|stream ended/i.test(m)) return E2EError("altered", null, err);
    if (/invalid version|invalid header|invalid stanza/.test(m)) return E2EError("format", null, err);
    if (err instanceof TypeError) return E2EError("network", null, err);
    return E2EError("altered", null, err);
  }

  // generateIdentity returns a fresh X25519 key pair: {identity: "AGE-SECRET-KEY-1…", recipient: "age1…"}.
  async function generateIdentity() {
    var age = vendor().age;
    var identity = await age.generateX25519Identity();
    return { identity: identity, recipient: await age.identityToRecipient(identity) };
  }

  // validIdentity reports whether s looks like an age X25519 identity.
  function validIdentity(s) {
    return typeof s === "string" && /^AGE-SECRET-KEY-1[0-9A-Z]{58}$/.test(s);
  }

  // encrypter returns an age Encrypter for key: {recipients: ["age1…"]}, {identity}
  // (encrypts to its recipient) or {passphrase}.
  async function encrypter(key) {
    var age = vendor().age;
    var e = new age.Encrypter();
    if (key.passphrase) {
      e.setPassphrase(key.passphrase);
    } else {
      var rs = key.recipients ? key.recipients.slice() : [];
      if (key.identity) rs.push(await age.identityToRecipient(key.identity));
      if (rs.length === 0) throw new Error("no recipient to encrypt to");
      rs.forEach(function (r) { e.addRecipient(r); });
    }
    return e;
  }

  function decrypter(key) {
    var d = new (vendor().age.Decrypter)();
    try {
      if (key.passphrase) d.addPassphrase(key.passphrase);
      if (key.identity) d.addIdentity(key.identity);
    } catch (err) {
      throw E2EError("key", null, err);
    }
    return d;
  }

  // encryptFile encrypts a File or Blob as a stream: {stream, size}, size being the
  // ciphertext's length (for tus uploadSize), known before any byte is read.
  async function encryptFile(file, key) {
    var e = await encrypter(key);
    var s = await e.encrypt(file.stream());
    return { stream: s, size: s.size(file.size) };
  }

  // encryptBytes encrypts a string or Uint8Array whole (the manifest).
  async function encryptBytes(data, key) {
    return (await encrypter(key)).encrypt(data);
  }

  // decryptBytes decrypts a whole age file (Uint8Array) to a Uint8Array.
  async function decryptBytes(data, key) {
    try {
      return await decrypter(key).decrypt(data);
    } catch (err) {
      throw classify(err);
    }
  }

  // decryptStream decrypts a ReadableStream of an age file. It resolves once the header
  // was read and opened (a wrong key rejects here, kind "key"); the returned stream
  // errors with an E2EError of kind "altered" when a chunk fails age's authentication,
  // so a consumer never gets a silently truncated file. size(ciphertextLength) gives the
  // plaintext's length.
  async function decryptStream(readable, key) {
    var out;
    try {
      out = await decrypter(key).decrypt(readable);
    } catch (err) {
      throw classify(err);
    }
    // Map the source's errors to our kinds for the reader.
    var reader = out.getReader();
    var s = new ReadableStream({
      pull: function (c) {
        return reader.read().then(function (r) {
          if (r.done) c.close(); else c.enqueue(r.value);
        }, function (err) { c.error(classify(err)); });
      },
      cancel: function (why) { return reader.cancel(why); }
    }, { highWaterMark: 1 });
    s.size = out.size;
    return s;
  }

  // fetchDecrypt fetches url (same origin, with the link's cookie) and decrypts its body:
  // {stream, size} (size: the plaintext's length when the server gave Content-Length).
  async function fetchDecrypt(url, key, init) {
    var res;
    try {
      res = await fetch(url, Object.assign({ credentials: "same-origin" }, init || {}));
    } catch (err) {
      throw E2EError("network", null, err);
    }
    if (!res.ok) throw httpError(res, await res.text().catch(function () { return ""; }));
    var stream = await decryptStream(res.body, key);
    var len = Number(res.headers.get("Content-Length"));
    var size = null;
    if (len > 0) { try { size = stream.size(len); } catch (e) { size = null; } }
    return { stream: stream, size: size };
  }

  function httpError(res, body) {
    var why = "the server answered " + res.status;
    try { var j = JSON.parse(body); if (j && j.detail) why = j.detail; } catch (e) { /* not JSON */ }
    var e = E2EError("http", why);
    e.status = res.status;
    return e;
  }

  // headerKind reads the start of an age file (Uint8Array, or a URL to fetch its first
  // bytes from) and says how it opens: "scrypt" (a passphrase), "X25519" (a key), or the
  // first stanza's type; "none" when it is not an age file.
  function headerKindOf(bytes) {
    var text = new TextDecoder().decode(bytes.subarray(0, Math.min(bytes.length, 256)));
    if (text.indexOf(MAGIC) !== 0) return "none";
    var m = /^-> (\S+)/m.exec(text.slice(MAGIC.length));
    return m ? m[1] : "none";
  }
  async function headerKind(src) {
    if (typeof src !== "string") return headerKindOf(src);
    var res = await fetch(src, { credentials: "same-origin", headers: { Range: "bytes=0-255" } });
    if (!res.ok) throw httpError(res, await res.text().catch(function () { return ""; }));
    var reader = res.body.getReader();
    var got = new Uint8Array(0);
    while (got.length < 256) {
      var r = await reader.read();
      if (r.done) break;
      var n = new Uint8Array(got.length + r.value.length);
      n.set(got); n.set(r.value, got.length);
      got = n;
    }
    reader.cancel().catch(function () {});
    return headerKindOf(got);
  }

  // blobChunks turns a ciphertext stream into Blobs of about 1 MiB for tus-js-client,
  // whose stream source joins and slices Blobs without copying them (one Uint8Array per
  // read would be copied over and over, and Chromium sends a Blob body about ten times
  // faster: 20 against 2 MiB/s measured for 32 MiB). It keeps encrypting up to
  // readAhead Blobs ahead of tus, so the next chunk is ready while a PATCH is sent.
  var readAhead = 16;
  function blobChunks(stream) {
    var parts = [];
    var held = 0;
    return stream.pipeThrough(new TransformStream({
      transform: function (chunk, c) {
        parts.push(chunk);
        held += chunk.length;
        if (held >= 1 << 20) { c.enqueue(new Blob(parts)); parts = []; held = 0; }
      },
      flush: function (c) { if (held > 0) c.enqueue(new Blob(parts)); }
    }, undefined, new CountQueuingStrategy({ highWaterMark: readAhead })));
  }

  // Manifest: {version: 1, files: {"<file id>": {name, type, size}}}, an age file too.
  async function encryptManifest(manifest, key) {
    return encryptBytes(JSON.stringify(manifest), key);
  }
  async function decryptManifest(bytes, key) {
    var plain = await decryptBytes(bytes, key);
    var m = JSON.parse(new TextDecoder().decode(plain));
    if (!m || typeof m.files !== "object") throw E2EError("format", "the manifest is not readable");
    return m;
  }

  // contentDisposition builds an attachment header for name (RFC 6266 / 5987).
  function contentDisposition(name) {
    var ascii = String(name).replace(/[^\x20-\x7e]|["\\]/g, "_");
    return "attachment; filename=\"" + ascii + "\"; filename*=UTF-8''" +
      encodeURIComponent(name).replace(/['()*]/g, function (c) { return "%" + c.charCodeAt(0).toString(16).toUpperCase(); });
  }

  // ---- In a page: the service worker that writes decrypted downloads to disk ----
  //
  // saveViaWorker(job, onEvent) hands the job (one file: {url, name, type, size}; or a zip:
  // {zip: name, files: [...]}; with key) to /sw-e2e.js over a MessageChannel, then clicks a
  // link under /e2e/ that the worker answers with the decrypted stream as an attachment,
  // so the browser's download manager writes it to disk as it comes (memory stays
  // bounded). onEvent gets {type: "progress", bytes} / {type: "done", bytes} /
  // {type: "error", kind, message}; the worker errors the stream on a failure, so the
  // browser marks the download failed rather than keeping a truncated file.
  var workerReg = null;
  var active = 0;
  var pinger = null;

  async function worker() {
    if (!("serviceWorker" in navigator)) throw E2EError("unsupported", "This browser cannot save decrypted files (no service workers; a private window may turn them off).");
    if (!workerReg) {
      // Check for a newer worker now, not at the download's navigation: a worker
      // replaced between the job and the navigation would not know the job.
      workerReg = navigator.serviceWorker.register("/sw-e2e.js", { scope: "/e2e/" }).then(function (reg) {
        return reg.update().then(function () { return reg; }, function () { return reg; });
      });
    }
    var reg = await workerReg;
    var sw = reg.installing || reg.waiting;
    if (sw) {
      // A new worker (the first, or an update) takes over at once (skipWaiting): wait
      // for it, so the job goes to the worker that answers the navigation.
      await new Promise(function (resolve) {
        if (sw.state === "activated" || sw.state === "redundant") return resolve();
        sw.addEventListener("statechange", function () { if (sw.state === "activated" || sw.state === "redundant") resolve(); });
      });
    }
    if (!reg.active) throw E2EError("unsupported", "The download helper could not start; reload the page and try again.");
    return reg.active;
  }

  function randomID() {
    var b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return Array.prototype.map.call(b, function (x) { return ("0" + x.toString(16)).slice(-2); }).join("");
  }

  async function saveViaWorker(job, onEvent) {
    var sw = await worker();
    var id = randomID();
    var ch = new MessageChannel();
    await new Promise(function (resolve, reject) {
      var t = setTimeout(function () { reject(E2EError("unsupported", "The download helper did not answer; reload the page and try again.")); }, 10000);
      ch.port1.onmessage = function (e) {
        var m = e.data || {};
        if (m.type === "ready") { clearTimeout(t); resolve(); return; }
        if (m.type === "done" || m.type === "error") {
          active--;
          if (active === 0 && pinger) { clearInterval(pinger); pinger = null; }
        }
        if (onEvent) onEvent(m);
      };
      sw.postMessage({ type: "job", id: id, job: job }, [ch.port2]);
    });
    active++;
    // A worker with no event for a while may be stopped; a ping keeps it alive while
    // it streams.
    if (!pinger) pinger = setInterval(function () { sw.postMessage({ type: "ping" }); }, 10000);
    var a = document.createElement("a");
    a.href = "/e2e/" + (job.zip ? "zip" : "file") + "/" + id;
    a.rel = "noopener";
    a.style.display = "none";
    document.body.appendChild(a);
    a.click();
    a.remove();
    return id;
  }

  // ---- Previews of encrypted images, made in the page from the decrypted bytes ----
  //
  // The server cannot make them (it holds ciphertext only), so the page that has the key
  // fetches the file, decrypts it here and draws a thumbnail on a <canvas>: no URL of the
  // decrypted bytes exists, so the Content-Security-Policy (img-src 'self' data:, no blob:)
  // stays as it is, there is no object URL to revoke, and nothing decrypted leaves the
  // page. Only files
  // of at most previewMaxBytes whose header declares at most previewMaxPixels get one; the
  // header is read from the first decrypted bytes, before anything is decoded, so a
  // decompression bomb costs a few kilobytes and no decoding (the server's limit for the
  // previews it makes, docs/API.md "Image previews").
  var previewMaxBytes = 20 << 20;
  var previewMaxPixels = 40000000;
  var previewBox = 160; // the thumbnail's longer side in canvas pixels (app.css shows it at 4rem)

  // imageKind says whether a manifest entry {name, type, size} is an image the page can
  // preview: "png", "jpeg", "gif", "webp", or "" (by its type, else its name).
  function imageKind(m) {
    if (!m) return "";
    var t = String(m.type || "").toLowerCase();
    var byType = { "image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/pjpeg": "jpeg", "image/gif": "gif", "image/webp": "webp" }[t];
    if (byType) return byType;
    if (t && t !== "application/octet-stream") return "";
    var ext = /\.([a-z0-9]+)$/i.exec(String(m.name || ""));
    return ext ? ({ png: "png", jpg: "jpeg", jpeg: "jpeg", jpe: "jpeg", gif: "gif", webp: "webp" }[ext[1].toLowerCase()] || "") : "";
  }

  // previewable reports whether a manifest entry gets a preview at all (an image of at
  // most previewMaxBytes).
  function previewable(m) {
    return !!imageKind(m) && typeof m.size === "number" && m.size > 0 && m.size <= previewMaxBytes;
  }

  function u16be(b, i) { return (b[i] << 8) | b[i + 1]; }
  function u32be(b, i) { return ((b[i] << 24) >>> 0) + (b[i + 1] << 16) + (b[i + 2] << 8) + b[i + 3]; }
  function u16le(b, i) { return b[i] | (b[i + 1] << 8); }
  function u24le(b, i) { return b[i] | (b[i + 1] << 8) | (b[i + 2] << 16); }

  // imageSize reads an image's dimensions from its first bytes: {kind, width, height};
  // null while more bytes are needed; false when b is no PNG, JPEG, GIF or WebP it can read.
  function imageSize(b) {
    if (b.length < 12) return null;
    if (b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47) {
      if (b.length < 24) return null;
      // The signature, then IHDR first: length, "IHDR", width, height.
      if (b[12] !== 0x49 || b[13] !== 0x48 || b[14] !== 0x44 || b[15] !== 0x52) return false;
      return { kind: "png", width: u32be(b, 16), height: u32be(b, 20) };
    }
    if (b[0] === 0xff && b[1] === 0xd8) {
      // Walk the markers to the first start of frame (SOF0…SOF15 less DHT, JPG, DAC).
      var i = 2;
      for (;;) {
        if (i + 4 > b.length) return null;
        if (b[i] !== 0xff) return false;
        var mk = b[i + 1];
        if (mk === 0xff) { i++; continue; }
        if (mk === 0xd8 || mk === 0x01 || (mk >= 0xd0 && mk <= 0xd7)) { i += 2; continue; }
        if (mk === 0xd9 || mk === 0xda) return false; // end or scan before any frame
        var len = u16be(b, i + 2);
        if (len < 2) return false;
        if (mk >= 0xc0 && mk <= 0xcf && mk !== 0xc4 && mk !== 0xc8 && mk !== 0xcc) {
          if (i + 9 > b.length) return null;
          return { kind: "jpeg", width: u16be(b, i + 7), height: u16be(b, i + 5) };
        }
        i += 2 + len;
      }
    }
    if (b[0] === 0x47 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x38) {
      return { kind: "gif", width: u16le(b, 6), height: u16le(b, 8) };
    }
    if (b[0] === 0x52 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x46 && b[8] === 0x57 && b[9] === 0x45 && b[10] === 0x42 && b[11] === 0x50) {
      if (b.length < 30) return null;
      var fourcc = String.fromCharCode(b[12], b[13], b[14], b[15]);
      if (fourcc === "VP8X") return { kind: "webp", width: u24le(b, 24) + 1, height: u24le(b, 27) + 1 };
      if (fourcc === "VP8L") {
        if (b[20] !== 0x2f) return false;
        var bits = b[21] | (b[22] << 8) | (b[23] << 16) | (b[24] << 24);
        return { kind: "webp", width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
      }
      if (fourcc === "VP8 ") {
        if (b[23] !== 0x9d || b[24] !== 0x01 || b[25] !== 0x2a) return false;
        return { kind: "webp", width: u16le(b, 26) & 0x3fff, height: u16le(b, 28) & 0x3fff };
      }
      return false;
    }
    return false;
  }

  // saneSize reports whether dimensions {width, height} may be decoded.
  function saneSize(d) {
    return !!d && d.width > 0 && d.height > 0 && d.width * d.height <= previewMaxPixels;
  }

  // previewImage fetches url, decrypts it with key and draws a thumbnail of the image into
  // a new <canvas> (data-natural-width and -height: the image's own size). It reads at
  // most previewMaxBytes and stops at the header when it declares more than
  // previewMaxPixels (or is not an image): those reject with an E2EError of kind
  // "too-large" or "not-image", having decoded nothing.
  async function previewImage(url, key, label) {
    var d = await fetchDecrypt(url, key);
    var reader = d.stream.getReader();
    var parts = [];
    var got = 0;
    var head = new Uint8Array(0);
    var dims = null;
    try {
      for (;;) {
        var r = await reader.read();
        if (r.done) break;
        got += r.value.length;
        if (got > previewMaxBytes) throw E2EError("too-large", "the file is too large for a preview");
        parts.push(r.value);
        if (dims === null) {
          if (head.length < 1 << 20) {
            var n = new Uint8Array(head.length + r.value.length);
            n.set(head); n.set(r.value, head.length);
            head = n;
          }
          dims = imageSize(head);
          if (dims === false) throw E2EError("not-image", "the file is not an image the page can show");
          if (dims && !saneSize(dims)) throw E2EError("too-large", "the image declares " + dims.width + " × " + dims.height + " pixels");
        }
      }
    } catch (err) {
      reader.cancel().catch(function () {});
      throw err;
    }
    if (!dims) throw E2EError("not-image", "the file is not an image the page can show");
    var scale = Math.min(1, previewBox / Math.max(dims.width, dims.height));
    var w = Math.max(1, Math.round(dims.width * scale));
    var h = Math.max(1, Math.round(dims.height * scale));
    var bitmap;
    try {
      bitmap = await createImageBitmap(new Blob(parts, { type: "image/" + dims.kind }), { resizeWidth: w, resizeHeight: h, resizeQuality: "high" });
    } catch (err) {
      throw E2EError("not-image", "the image could not be decoded", err);
    }
    parts = null;
    var c = document.createElement("canvas");
    c.width = w;
    c.height = h;
    c.className = "e2e-preview";
    c.setAttribute("role", "img");
    if (label) c.setAttribute("aria-label", label);
    c.setAttribute("data-natural-width", String(dims.width));
    c.setAttribute("data-natural-height", String(dims.height));
    c.getContext("2d").drawImage(bitmap, 0, 0);
    bitmap.close();
    return c;
  }

  // showPreviews draws, one file after another, the thumbnail of each item {el, url,
  // name, place, status} from its decrypted bytes (previewImage). place(canvas) puts it
  // in the page, or returns false when the page no longer wants it (its key was
  // locked), which ends the run; status, when given, says "no preview" on a failure.
  // el's data-preview says how it went: loading, shown, or none (with data-preview-why:
  // too-large, not-image, or the error's kind).
  function showPreviews(items, key) {
    return items.reduce(function (done, it) {
      return done.then(function () {
        it.el.setAttribute("data-preview", "loading");
        return previewImage(it.url, key, T("e2e_preview_of", "Preview of") + " " + it.name).then(function (c) {
          if (it.place(c) === false) {
            it.el.removeAttribute("data-preview");
            throw E2EError("cancelled", "previews stopped");
          }
          it.el.setAttribute("data-preview", "shown");
        }, function (err) {
          it.el.setAttribute("data-preview", "none");
          it.el.setAttribute("data-preview-why", (err && err.kind) || "error");
          if (it.status) {
            it.status.hidden = false;
            it.status.textContent = T("e2e_no_preview", "no preview");
          }
        });
      });
    }, Promise.resolve()).catch(function () { /* stopped by place */ });
  }

  // Keys the sender's browser keeps, by package id (never sent to the server): the
  // identity in localStorage (the package page shows the full link again), a passphrase
  // only in sessionStorage (this tab). The manifest entries of the files sent so far sit
  // beside them.
  var storePrefix = "shipfile-e2e:";
  function loadKey(pkg) {
    var raw = null;
    try { raw = sessionStorage.getItem(storePrefix + pkg) || localStorage.getItem(storePrefix + pkg); } catch (e) { return null; }
    if (!raw) return null;
    try { return JSON.parse(raw); } catch (e) { return null; }
  }
  function saveKey(pkg, entry) {
    var s = JSON.stringify(entry);
    if (entry.passphrase) sessionStorage.setItem(storePrefix + pkg, s);
    else localStorage.setItem(storePrefix + pkg, s);
  }
  function forgetKey(pkg) {
    try { sessionStorage.removeItem(storePrefix + pkg); localStorage.removeItem(storePrefix + pkg); } catch (e) { /* none kept */ }
  }

  self.shipfileE2E = {
    MAGIC: MAGIC,
    E2EError: E2EError,
    messages: messages,
    classify: classify,
    generateIdentity: generateIdentity,
    validIdentity: validIdentity,
    encryptFile: encryptFile,
    blobChunks: blobChunks,
    encryptBytes: encryptBytes,
    decryptBytes: decryptBytes,
    decryptStream: decryptStream,
    fetchDecrypt: fetchDecrypt,
    headerKind: headerKind,
    encryptManifest: encryptManifest,
    decryptManifest: decryptManifest,
    contentDisposition: contentDisposition,
    saveViaWorker: saveViaWorker,
    loadKey: loadKey,
    saveKey: saveKey,
    forgetKey: forgetKey,
    imageKind: imageKind,
    imageSize: imageSize,
    previewable: previewable,
    previewImage: previewImage,
    showPreviews: showPreviews,
    previewMaxBytes: previewMaxBytes
  };
})();
