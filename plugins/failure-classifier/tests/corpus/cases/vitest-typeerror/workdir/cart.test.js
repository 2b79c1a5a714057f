import { test, expect } from 'vitest';
import { total } from './cart.js';
test('total', () => expect(total({})).toBe(0));
