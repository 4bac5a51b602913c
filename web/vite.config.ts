// The studio web app. `npm run build` (run by scripts/bootstrap.sh) writes the bundle into the
// gateway's package, which serves it at `/`; nothing is fetched at run time.
import { defineConfig } from "vite";

export default defineConfig({
  build: {
    outDir: "../services/gateway/spotter_gateway/web/dist",
    emptyOutDir: true,
    sourcemap: true,
  },
  oxc: { jsx: { runtime: "automatic" } },
  server: { proxy: { "/organizations": "http://127.0.0.1:8080", "/me": "http://127.0.0.1:8080", "/dev": "http://127.0.0.1:8080" } },
});
