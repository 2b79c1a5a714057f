const test = require('node:test');
test('slow', { timeout: 100 }, async () => { await new Promise((r) => setTimeout(r, 1000)); });
