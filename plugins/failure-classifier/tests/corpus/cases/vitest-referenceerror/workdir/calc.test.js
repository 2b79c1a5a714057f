import { test, expect } from 'vitest';
import { area } from './calc.js';
test('area', () => expect(area(1)).toBeCloseTo(3.14, 1));
