import { test, expect } from 'vitest';
import { cube } from './calc.js';
test('cube', () => expect(cube(3)).toBe(27));
