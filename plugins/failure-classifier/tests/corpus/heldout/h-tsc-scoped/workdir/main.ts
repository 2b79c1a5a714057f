import { Component } from '@angular/core';
console.log(Component);
