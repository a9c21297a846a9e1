export interface Foo { a: number }
export function hello(x: Foo): string { return `hi ${x.a}` }
