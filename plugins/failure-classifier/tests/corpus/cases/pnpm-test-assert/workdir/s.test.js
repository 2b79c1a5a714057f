const test = require('node:test');
const assert = require('node:assert');
const { slug } = require('./s');
test('slug', () => { assert.strictEqual(slug('A B'), 'a-b'); });
