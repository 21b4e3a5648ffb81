// Vite build of the runwatch web app into the Python package's static folder.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/",
  build: {
    outDir: "../src/runwatch/server/static",
    emptyOutDir: true,
    chunkSizeWarningLimit: 1500,
    sourcemap: false,
  },
  server: {
    proxy: { "/api": "http://127.0.0.1:8765" },
  },
});
