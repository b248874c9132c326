// Tailwind CSS 3 configuration. `make generate` builds views/input.css into the committed
// static/css/app.css; run it again after changing classes in views/ or handlers/.
/** @type {import('tailwindcss').Config} */
module.exports = {
  content: ['./views/**/*.templ', './views/**/*.go', './handlers/**/*.go'],
  darkMode: 'media',
  theme: {
    extend: {
      fontFamily: {
        mono: ['ui-monospace', 'SFMono-Regular', 'Menlo', 'Consolas', 'Liberation Mono', 'monospace'],
      },
    },
  },
  plugins: [],
};
