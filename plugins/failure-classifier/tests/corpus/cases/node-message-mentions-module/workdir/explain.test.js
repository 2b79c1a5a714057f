const test = require('node:test');
const assert = require('node:assert');
const { explain } = require('./explain');
test('explain', () => { assert.strictEqual(explain('lodash'), "Cannot find module 'lodash'"); });
