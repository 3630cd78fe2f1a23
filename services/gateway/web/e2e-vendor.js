// e2e-vendor.js is the entry of the browser's end-to-end encryption bundle
// (scripts/assets.sh builds it with esbuild into internal/docs/assets/e2e.bundle.js,
// served at /static/docs/e2e.bundle.js): age-encryption for the age v1 format and
// client-zip for "Download all". It sets self.shipfileVendor, so both a page
// (<script src>) and the service worker (importScripts) can use it.
import * as age from "age-encryption";
import { downloadZip, makeZip, predictLength } from "client-zip";

self.shipfileVendor = { age, zip: { downloadZip, makeZip, predictLength } };
