// shipfile: end-to-end encryption of OUTBOUND packages in the browser (docs/WEB-UI.md,
// "End-to-end encryption in the browser"): the send form's option, the draft's upload zone
// (every file encrypted here before it leaves, the encrypted manifest PUT after each), the
// full link with its key after sending, and the recipient's page (decrypting to disk
// through the service worker, "Download all" zipped here). Uses self.shipfileE2E
// (static/e2e.js). The key and the passphrase never go to the server.
(function () {
  "use strict";

  var E2E = self.shipfileE2E;
  if (!E2E) return;
  var meta = document.querySelector('meta[name="csrf-token"]');
  var csrf = meta ? meta.getAttribute("content") : "";
  var pendingKey = "shipfile-e2e:pending";
  // The tus chunk of an encrypted upload: one PATCH, and what is held for a retry.
  var chunkSize = 16 << 20;

  // human is app.js's size format (app.js runs first: both are deferred, it comes
  // earlier in the page).
  var human = self.shipfileHuman;
  // T is the page's words (static/app.js's shipfileMsg), English where there are none.
  var T = window.shipfileMsg || function (key, english) { return english; };

  function show(el, text, kind) {
    if (!el) return;
    el.hidden = false;
    el.textContent = text;
    if (kind) el.setAttribute("data-kind", kind);
  }

  // ---- The send form: "Encrypt end to end", with the key in the link or a passphrase.
  var form = document.getElementById("package-form");
  var box = document.getElementById("encryption");
  if (form && box) {
    var modes = document.getElementById("e2e-mode");
    var pass = document.getElementById("e2e-passphrase");
    var passField = document.getElementById("e2e-passphrase-field");
    var modeInputs = document.querySelectorAll("input[name=e2e_mode]");
    var sync = function () {
      if (modes) modes.hidden = !box.checked;
      var byPass = document.querySelector("input[name=e2e_mode]:checked");
      if (passField) passField.hidden = !(box.checked && byPass && byPass.value === "passphrase");
    };
    box.addEventListener("change", sync);
    modeInputs.forEach(function (m) { m.addEventListener("change", sync); });
    sync();
    form.addEventListener("submit", function (e) {
      sessionStorage.removeItem(pendingKey);
      if (!box.checked) return;
      var byPass = document.querySelector("input[name=e2e_mode]:checked");
      if (byPass && byPass.value === "passphrase") {
        var err = document.getElementById("e2e-passphrase-error");
        if (!pass.value || pass.value.length < 10) {
          e.preventDefault();
          show(err, "Choose a passphrase of at least 10 characters (it is what protects the files).");
          pass.focus();
          return;
        }
        // Kept in this tab only, for the draft's page to pick up; never posted.
        sessionStorage.setItem(pendingKey, JSON.stringify({ passphrase: pass.value }));
      } else {
        sessionStorage.setItem(pendingKey, JSON.stringify({ mode: "key" }));
      }
    });
  }

  // ---- The draft's page: encrypt every file, keep the manifest current on the server.
  function manifestOf(entry) {
    return { version: 1, files: entry.files || {} };
  }

  function putManifest(pkg, entry) {
    return E2E.encryptManifest(manifestOf(entry), entry).then(function (bytes) {
      return fetch("/api/v1/packages/" + pkg + "/manifest", {
        method: "PUT",
        credentials: "same-origin",
        headers: { "Content-Type": "application/octet-stream", "X-CSRF-Token": csrf },
        body: bytes
      });
    }).then(function (res) {
      if (res.status === 204) return;
      return res.text().then(function (body) {
        var why = "the server answered " + res.status;
        try { var j = JSON.parse(body); if (j.detail) why = j.detail; } catch (e) { /* not JSON */ }
        throw new Error("the file list could not be saved: " + why);
      });
    });
  }

  function ownerKey(pkg, fileCount) {
    var entry = E2E.loadKey(pkg);
    if (entry) return Promise.resolve(entry);
    var pending = null;
    try { pending = JSON.parse(sessionStorage.getItem(pendingKey) || "null"); } catch (e) { pending = null; }
    sessionStorage.removeItem(pendingKey);
    if (pending && pending.passphrase) {
      entry = { passphrase: pending.passphrase, files: {} };
      E2E.saveKey(pkg, entry);
      return Promise.resolve(entry);
    }
    if (fileCount > 0) return Promise.resolve(null); // another browser made this package
    return E2E.generateIdentity().then(function (k) {
      entry = { identity: k.identity, files: {} };
      E2E.saveKey(pkg, entry);
      return entry;
    });
  }

  var zone = document.querySelector(".dropzone[data-e2e=outbound]");
  if (zone) {
    var pkg = zone.getAttribute("data-package-id");
    var status = document.getElementById("e2e-status");
    var finalize = document.getElementById("finalize");
    var ready = ownerKey(pkg, Number(zone.getAttribute("data-file-count") || "0"));
    ready.then(function (entry) {
      if (!entry) {
        zone.setAttribute("data-disabled", "1");
        zone.querySelector("input[type=file]").disabled = true;
        if (finalize) finalize.disabled = true;
        show(status, "The key of this encrypted package is kept in the browser that created it: add files and send it from there.", "nokey");
        return;
      }
      zone.setAttribute("data-e2e-ready", entry.passphrase ? "passphrase" : "key");
      show(status, entry.passphrase
        ? "Files are encrypted in this browser with your passphrase before they are uploaded."
        : "Files are encrypted in this browser before they are uploaded; the key stays here and goes into the link you pass on.");
      zone.shipfileEncrypt = function (file) {
        return E2E.encryptFile(file, entry).then(function (enc) {
          return {
            input: E2E.blobChunks(enc.stream).getReader(),
            uploadSize: enc.size,
            chunkSize: chunkSize,
            metadata: { filename: "file.age", filetype: "application/octet-stream" },
            onUploaded: function (fileId) {
              if (!fileId) throw new Error("the server did not say which file it recorded");
              entry.files[fileId] = { name: file.name, type: file.type || "application/octet-stream", size: file.size };
              E2E.saveKey(pkg, entry);
              return putManifest(pkg, entry);
            }
          };
        });
      };
      // Send the manifest once more before finalizing, so it is on the server for sure.
      var fform = finalize && finalize.form;
      if (fform) {
        fform.addEventListener("submit", function (e) {
          if (fform.getAttribute("data-manifest") === "sent") return;
          e.preventDefault();
          finalize.disabled = true;
          putManifest(pkg, entry).then(function () {
            fform.setAttribute("data-manifest", "sent");
            fform.submit();
          }, function (err) {
            finalize.disabled = false;
            show(status, err.message, "error");
          });
        });
      }
    }, function (err) {
      show(status, "Encryption is not available in this browser: " + err.message, "error");
    });
  }

  // ---- The owner's package page: real names from this browser's manifest, the key,
  // and downloads decrypted to disk.
  var ownerFiles = document.querySelector("[data-e2e-owner]");
  if (ownerFiles) {
    var opkg = ownerFiles.getAttribute("data-e2e-owner");
    var oentry = E2E.loadKey(opkg);
    var keyBox = document.getElementById("e2e-key");
    if (oentry && oentry.identity && keyBox) {
      document.getElementById("e2e-key-value").value = oentry.identity;
      keyBox.hidden = false;
    } else if (!oentry) {
      show(document.getElementById("e2e-owner-status"), "This browser does not hold the key of this encrypted package: the names and contents stay hidden here.", "nokey");
    }
    // The owner's downloads count nothing and take nothing of a link's budget, so the
    // previews of this browser's images are drawn at once.
    var ownerPreviews = [];
    ownerFiles.querySelectorAll("tr[data-file-id]").forEach(function (tr) {
      var m = oentry && oentry.files && oentry.files[tr.getAttribute("data-file-id")];
      var a = tr.querySelector("a[data-e2e-download]");
      var nameEl = tr.querySelector(".file-name") || a;
      if (m && nameEl) {
        nameEl.textContent = m.name;
        tr.setAttribute("data-name", m.name);
      }
      if (!a) return;
      // Without the key here the link gives the ciphertext (for age -d).
      if (!oentry) return;
      if (E2E.previewable(m)) {
        ownerPreviews.push({ el: tr, url: a.getAttribute("data-e2e-download"), name: m.name, place: function (c) {
          a.parentNode.insertBefore(c, a);
          a.parentNode.insertBefore(document.createTextNode(" "), a);
        } });
      }
      a.addEventListener("click", function (e) {
        e.preventDefault();
        var st = tr.querySelector(".file-status");
        E2E.saveViaWorker({ url: a.getAttribute("data-e2e-download"), name: m ? m.name : a.textContent, size: m ? m.size : null, key: oentry },
          function (ev) { report(st, ev, m ? m.size : 0); }).catch(function (err) { report(st, { type: "error", kind: err.kind, message: err.message }); });
      });
    });
    if (oentry && ownerPreviews.length) E2E.showPreviews(ownerPreviews, oentry);
  }

  // ---- After sending: the link to pass on carries the key in its fragment.
  var sent = document.querySelector("[data-e2e-sent]");
  if (sent) {
    var spkg = sent.getAttribute("data-e2e-sent");
    var sentry = E2E.loadKey(spkg);
    var note = document.getElementById("e2e-sent-note");
    if (sentry && sentry.identity) {
      sent.querySelectorAll("input[id^=magic-link]").forEach(function (inp) {
        inp.value = inp.value.split("#")[0] + "#" + sentry.identity;
        inp.setAttribute("data-e2e", "key");
      });
      // The server drew the QR codes of the links without the key: they would not open the files.
      sent.querySelectorAll(".qr-box").forEach(function (el) { el.hidden = true; });
      show(note, "Pass on this full link yourself: the part after # is the key that decrypts the files. The e-mailed link lacks it and cannot open them; the server never saw it.", "key");
    } else if (sentry && sentry.passphrase) {
      show(note, "The e-mailed link works, but the recipient needs your passphrase to decrypt the files: tell it to them another way.", "passphrase");
    } else {
      show(note, "This browser does not hold the key of this package: the link alone cannot decrypt the files.", "nokey");
    }
  }

  // ---- The recipient's page.
  function report(el, ev, total) {
    if (!el) return;
    el.hidden = false;
    el.setAttribute("data-state", ev.type);
    if (ev.type === "progress") {
      el.textContent = T("dl_decrypting", "decrypting to disk") + " · " + human(ev.bytes) + (total ? " " + T("of", "of") + " " + human(total) : "");
    } else if (ev.type === "done") {
      el.textContent = T("dl_saved", "decrypted and saved") + " · " + human(ev.bytes);
    } else if (ev.type === "error") {
      el.setAttribute("data-kind", ev.kind || "");
      el.textContent = ev.message || T("dl_failed", "the download failed");
    }
  }

  var page = document.getElementById("e2e-link");
  if (page) {
    var errBox = document.getElementById("e2e-error");
    var state = document.getElementById("e2e-state");
    var passForm = document.getElementById("e2e-unlock");
    var rows = Array.prototype.slice.call(document.querySelectorAll("#files li[data-file-id]"));
    var all = document.getElementById("download-all");
    var key = null;
    var manifest = null;

    var fail = function (kind, message) {
      page.setAttribute("data-e2e-state", "error");
      page.setAttribute("data-e2e-error", kind);
      show(errBox, message || E2E.messages[kind] || kind);
    };

    var open = function () {
      page.setAttribute("data-e2e-state", "open");
      if (errBox) errBox.hidden = true;
      if (passForm) passForm.hidden = true;
      show(state, T("e2e_decrypted", "Decrypted in this browser: the server never sees these files, their names or the key."));
      var names = {};
      rows.forEach(function (li) {
        var m = manifest && manifest.files[li.getAttribute("data-file-id")];
        if (m) {
          li.querySelector(".file-name").textContent = m.name;
          li.querySelector(".file-size").textContent = human(m.size) + (m.type ? " · " + m.type : "");
          li.setAttribute("data-name", m.name);
        }
        var btn = li.querySelector("[data-e2e-download]");
        if (btn) btn.disabled = false;
        // Unique names inside the zip; without a manifest the neutral name less ".age".
        var name = m ? m.name : li.querySelector(".file-name").textContent.replace(/\.age$/, "");
        var n = 1, base = name;
        while (names[name]) { n++; name = base.replace(/(\.[^.]*)?$/, " (" + n + ")$1"); }
        names[name] = true;
        li.setAttribute("data-zip-name", name);
      });
      if (all) all.disabled = false;
      offerPreviews();
    };

    // Every answer of a file through the link from its first byte counts a download (the
    // sender's download count, package.downloaded, the owner's e-mail) and, under a
    // download limit, takes a whole copy of the file's budget (docs/API.md, "Download
    // limit"): the page cannot fetch an image for its preview without that. So it fetches
    // previews only when the recipient asks for them, saying what it costs, and offers
    // none under a limit, saying why.
    var offerPreviews = function () {
      if (document.getElementById("e2e-previews") || !manifest) return;
      var imgs = rows.filter(function (li) {
        return li.querySelector("[data-e2e-download]") && E2E.previewable(manifest.files[li.getAttribute("data-file-id")]);
      });
      if (!imgs.length) return;
      var box = document.createElement("p");
      box.id = "e2e-previews";
      box.className = "muted";
      var list = document.getElementById("files");
      list.parentNode.insertBefore(box, list);
      if (imgs.some(function (li) { return li.querySelector(".downloads-left"); })) {
        box.setAttribute("data-previews", "limited");
        box.textContent = T("e2e_previews_limited", "No previews of the images: this link has a download limit, and a preview would use up one of its downloads.");
        return;
      }
      box.setAttribute("data-previews", "offered");
      var btn = document.createElement("button");
      btn.type = "button";
      btn.className = "btn small";
      btn.id = "e2e-show-previews";
      btn.textContent = T("e2e_show_previews", "Show previews");
      box.appendChild(btn);
      box.appendChild(document.createTextNode(" " + T("e2e_previews_cost", "The images are fetched and decrypted in this browser: the sender sees that as a download of each.")));
      btn.addEventListener("click", function () {
        if (!key) return;
        btn.disabled = true;
        box.setAttribute("data-previews", "loading");
        E2E.showPreviews(imgs.map(function (li) {
          return { el: li, url: li.getAttribute("data-url"), name: li.getAttribute("data-name"), status: li.querySelector(".file-status"), place: function (c) {
            li.insertBefore(c, li.firstChild);
          } };
        }), key).then(function () {
          box.setAttribute("data-previews", "done");
          box.hidden = true;
        });
      });
    };

    // keyOf reads what the recipient pasted: a key AGE-SECRET-KEY-1…, or a full link
    // ending with one; "" when it is neither.
    var keyOf = function (s) {
      s = String(s || "").trim();
      var i = s.lastIndexOf("#");
      if (i >= 0) s = s.slice(i + 1).trim();
      s = s.toUpperCase();
      return E2E.validIdentity(s) ? s : "";
    };

    // keepKey puts a pasted key in the address's fragment, as if the full link had been
    // opened, so that a reload keeps it; the fragment never reaches the server.
    var keepKey = function (identity) {
      try { history.replaceState(history.state, "", location.pathname + location.search + "#" + identity); } catch (e) { /* stays in this page only */ }
    };

    var tryKey = function (k, bytes) {
      return E2E.decryptManifest(bytes, k).then(function (m) {
        key = k;
        manifest = m;
        open();
      });
    };

    var fromFragment = location.hash.slice(1);
    fetch(page.getAttribute("data-manifest-url"), { credentials: "same-origin" }).then(function (res) {
      if (res.status === 404) return null;
      if (!res.ok) throw new Error(T("e2e_list_failed", "the file list could not be fetched") + " (" + T("server_answered", "the server answered") + " " + res.status + ")");
      return res.arrayBuffer().then(function (b) { return new Uint8Array(b); });
    }).then(function (bytes) {
      var kind = bytes ? E2E.headerKind(bytes) : null;
      return Promise.resolve(kind).then(function (kind) {
        var byPassphrase = kind === "scrypt" || (!bytes && !fromFragment);
        if (byPassphrase) {
          page.setAttribute("data-e2e-state", "passphrase");
          passForm.hidden = false;
          show(state, T("e2e_passphrase_needed", "These files are end-to-end encrypted with a passphrase: the sender tells you what it is."));
          document.getElementById("e2e-passphrase").focus();
          passForm.addEventListener("submit", function (e) {
            e.preventDefault();
            var p = document.getElementById("e2e-passphrase").value;
            if (!p) return;
            var btn = passForm.querySelector("button");
            btn.disabled = true;
            show(state, T("e2e_checking_passphrase", "Checking the passphrase…"));
            var k = { passphrase: p };
            // Without a manifest the page cannot tell a key from a passphrase: a key opens too.
            var pasted = !bytes && keyOf(p);
            if (pasted) { k = { identity: pasted }; keepKey(pasted); }
            (bytes ? tryKey(k, bytes) : Promise.resolve().then(function () { key = k; open(); })).catch(function (err) {
              var e2 = E2E.classify(err);
              fail(e2.kind, e2.kind === "key" ? T("e2e_wrong_passphrase", "This passphrase does not open these files.") : e2.message);
              show(state, T("e2e_passphrase_needed", "These files are end-to-end encrypted with a passphrase: the sender tells you what it is."));
            }).then(function () { btn.disabled = false; });
          });
          return;
        }
        if (!fromFragment) {
          // The key, passed on separately, is pasted here: checked against the manifest
          // in this browser, never sent.
          var keyForm = document.getElementById("e2e-keyform");
          var keyInput = document.getElementById("e2e-key");
          var keyHint = T("e2e_missing_key", "This link is missing its key (the part after #): paste the key the sender gave you (AGE-SECRET-KEY-1…), or the full link.");
          page.setAttribute("data-e2e-state", "key");
          keyForm.hidden = false;
          show(state, keyHint);
          keyInput.focus();
          keyForm.addEventListener("submit", function (e) {
            e.preventDefault();
            var id = keyOf(keyInput.value);
            if (!id) {
              fail("nokey", T("e2e_not_key", "This is not a key: it starts with AGE-SECRET-KEY-1 (or paste the full link, with the part after #)."));
              show(state, keyHint);
              return;
            }
            var btn = keyForm.querySelector("button");
            btn.disabled = true;
            show(state, T("e2e_checking_key", "Checking the key…"));
            tryKey({ identity: id }, bytes).then(function () {
              keyForm.hidden = true;
              keyInput.value = "";
              keepKey(id);
            }, function (err) {
              var e2 = E2E.classify(err);
              fail(e2.kind, e2.kind === "key" ? T("e2e_wrong_key", "This key does not open these files: check that you pasted the whole key the sender gave you.") : e2.message);
              show(state, keyHint);
            }).then(function () { btn.disabled = false; });
          });
          return;
        }
        if (!E2E.validIdentity(fromFragment)) {
          fail("key");
          return;
        }
        var k = { identity: fromFragment };
        if (!bytes) { key = k; open(); return; }
        return tryKey(k, bytes).catch(function (err) {
          var e2 = E2E.classify(err);
          fail(e2.kind, e2.kind === "key" ? E2E.messages.key : e2.message);
        });
      });
    }).catch(function (err) {
      fail("network", err.message);
    });

    rows.forEach(function (li) {
      var btn = li.querySelector("[data-e2e-download]");
      if (!btn) return;
      btn.addEventListener("click", function () {
        if (!key) return;
        var m = manifest && manifest.files[li.getAttribute("data-file-id")];
        var st = li.querySelector(".file-status");
        li.setAttribute("data-download", "started");
        E2E.saveViaWorker({ url: li.getAttribute("data-url"), name: li.getAttribute("data-zip-name") || li.getAttribute("data-name"), size: m ? m.size : null, key: key },
          function (ev) {
            report(st, ev, m ? m.size : 0);
            if (ev.type === "done" || ev.type === "error") li.setAttribute("data-download", ev.type);
          }).catch(function (err) {
          report(st, { type: "error", kind: err.kind, message: err.message });
          li.setAttribute("data-download", "error");
        });
      });
    });

    if (all) {
      all.addEventListener("click", function () {
        if (!key) return;
        var st = document.getElementById("download-all-status");
        var files = rows.map(function (li) {
          var m = manifest && manifest.files[li.getAttribute("data-file-id")];
          return { url: li.getAttribute("data-url"), name: li.getAttribute("data-zip-name"), size: m ? m.size : null };
        });
        var total = files.reduce(function (t, f) { return t + (f.size || 0); }, 0);
        all.setAttribute("data-download", "started");
        E2E.saveViaWorker({ zip: (all.getAttribute("data-zip-name") || "files") + ".zip", files: files, key: key },
          function (ev) {
            report(st, ev, total);
            if (ev.type === "done" || ev.type === "error") all.setAttribute("data-download", ev.type);
          }).catch(function (err) {
          report(st, { type: "error", kind: err.kind, message: err.message });
          all.setAttribute("data-download", "error");
        });
      });
    }
  }
})();
