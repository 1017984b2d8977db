// ESLint (flat config): the recommended rules for the UI's sources (browser
// globals, ES modules) and for the build scripts (Node globals). Formatting
// is Prettier's job (printWidth 120, in package.json); `npm run lint` runs both.
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["node_modules/"] },
  js.configs.recommended,
  {
    files: ["src/**/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: globals.browser },
  },
  {
    files: ["*.js", "*.mjs"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: globals.node },
  },
];
