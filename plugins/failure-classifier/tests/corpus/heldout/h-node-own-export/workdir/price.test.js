import test from 'node:test';
import assert from 'node:assert';
import { gross } from './price.js';
test('gross', () => { assert.strictEqual(gross(10), 12); });
