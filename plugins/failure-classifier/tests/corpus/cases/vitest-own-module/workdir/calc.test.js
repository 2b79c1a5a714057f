import { test, expect } from 'vitest';
import { cube } from './calcs.js';
test('cube', () => expect(cube(3)).toBe(27));
