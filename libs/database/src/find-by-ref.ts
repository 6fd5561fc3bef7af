import { FindOptionsRelations, FindOptionsWhere, ObjectLiteral, Repository } from 'typeorm';
import { ApiError, parseId } from '@ws/common';

/** An operator's reference to a row: its id (either layout) or its unique name. 400 `Invalid <label> (<ref>)` otherwise. */
export async function findByRef<T extends ObjectLiteral & { id: string }>(
  repository: Repository<T>,
  ref: string,
  nameColumn: keyof T & string,
  label: string,
  relations?: FindOptionsRelations<T>,
): Promise<T> {
  const id = parseId(ref);
  const where = (id ? { id } : { [nameColumn]: ref }) as FindOptionsWhere<T>;
  const row = await repository.findOne({ where, relations });
  if (!row) throw ApiError.invalidId(label, ref);
  return row;
}
